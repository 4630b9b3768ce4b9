"""Container images for the containers backend: which image runs each component, and local builds of them.

Each component runs from one image: `kafka`, `spark` (master and worker), `minio`, `toxiproxy`, `s3proxy`. Where an
image comes from is chosen by CHAOS_IMAGES (except `s3proxy`, our own program, which has no public image: it is
always the local build, in every mode, and never pulled):

- `auto` (default): the well-known public image (PUBLIC, or CHAOS_IMAGE_<COMPONENT>=name:tag) when the engine
  already has it; otherwise the local build. Nothing is ever pulled implicitly: a missing tag would make
  Docker try a registry, and where none is reachable that fails late and obscurely.
- `public`: the public images only; a missing one is pulled explicitly, and a failed pull is one line.
- `local`: the local builds only.

Local builds use the package registries only, never a container registry: a Debian base made with
`debootstrap --variant=minbase bookworm` and `docker import`, a JRE image on top of it (Debian's OpenJDK 17,
installed with `docker build --network host`), and one image per component holding the same pinned,
verified artifacts the local backend runs (infra/artifacts.py): the Kafka jar set, the pyspark package's
jars, the MinIO, Toxiproxy and s3proxy binaries. They are tagged `chaos-suite/<image>:<inputs-hash>` — never with a
public image's name — where the hash covers the Dockerfile, the parent image and the artifact pins, so an
image is rebuilt exactly when its inputs change. Older builds of an image are removed after a new one.

Local builds mirror the public images' layouts (LAYOUT: java on PATH, /opt/kafka/libs, /opt/spark,
/usr/bin/minio, /toxiproxy; /s3proxy), so one set of in-image paths serves both. infra/containers.py runs each command
as the container's entrypoint (no shell needed: the Toxiproxy image has none), as the invoking user, and
copies its output to the component's log. Only the local builds are exercised on machines without a
registry; the Spark image must be able to run the driver's Python for executors (shared libraries of a
CPython 3.11: the local build installs Debian's python3 for them).

    python -m infra.images build [--force]   # build what is missing (or everything), print seconds per image
    python -m infra.images status            # which image each component would run
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import artifacts
from .artifacts import ArtifactPaths
from .errors import InfraError
from .paths import INFRA_DIR, cache_dir

COMPONENTS = ("toxiproxy", "minio", "kafka", "spark", "s3proxy")
# Components with no public image (built from this repository's source): always the local build.
LOCAL_ONLY = ("s3proxy",)
IMAGES_DIR = INFRA_DIR / "images"
LOCAL_REPOSITORY = "chaos-suite"
MODE_ENV = "CHAOS_IMAGES"
MODES = ("auto", "local", "public")
BUILD_FIX = "python -m infra.images build (or: make setup-containers)"

# Well-known public images equivalent to the local builds; CHAOS_IMAGE_<COMPONENT> overrides name and tag.
PUBLIC = {
    "kafka": "apache/kafka:4.1.1",
    "spark": "apache/spark:4.3.0",
    "minio": "minio/minio:RELEASE.2026-02-12T20-18-48Z",
    "toxiproxy": "ghcr.io/shopify/toxiproxy:2.12.0",
}

# The base: what debootstrap makes. Bump BASE_RECIPE when the way the base is made changes.
BASE_SUITE = "bookworm"
BASE_VARIANT = "minbase"
BASE_RECIPE = 1
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Layout:
    """Where programs are inside the images (the same in the public images and the local builds)."""

    java: str = "java"
    kafka_libs: str = "/opt/kafka/libs"
    spark_home: str = "/opt/spark"
    minio: str = "/usr/bin/minio"
    toxiproxy: str = "/toxiproxy"
    s3proxy: str = "/s3proxy"


LAYOUT = Layout()


def _stderr(message: str) -> None:
    print(f"[images] {message}", file=sys.stderr, flush=True)


def mode() -> str:
    chosen = os.environ.get(MODE_ENV, "auto").strip().lower() or "auto"
    if chosen not in MODES:
        raise InfraError(f"{MODE_ENV}={chosen!r} is not one of {', '.join(MODES)}")
    return chosen


def public_image(component: str) -> str:
    return os.environ.get(f"CHAOS_IMAGE_{component.upper()}", PUBLIC[component])


def docker_client(timeout: int = 600):
    """A Docker SDK client, or one line saying no engine answers."""
    import docker

    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except Exception as error:  # DockerException, requests errors: the engine is not there
        detail = str(error).splitlines()[0][:160] if str(error) else type(error).__name__
        raise InfraError(f"no Docker engine answers ({detail}); run: infra/engine.sh --install") from error


def _exists(client, reference: str) -> bool:
    import docker

    try:
        client.images.get(reference)
        return True
    except docker.errors.ImageNotFound:
        return False


def _short_hash(inputs: object) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:12]


# -- what each local image is made of ----------------------------------------------------------------------
@dataclass(frozen=True)
class LocalImage:
    name: str                        # debian, jre, kafka, spark, minio, toxiproxy
    parent: str | None               # name of the local image it is built FROM (None: the debootstrap base)
    files: tuple[tuple[str, Path], ...] = ()   # (path in the build context, file on this host)
    pins: tuple[tuple[str, str], ...] = ()     # (what, pinned identity) for the inputs hash

    @property
    def dockerfile(self) -> Path:
        return IMAGES_DIR / self.name / "Dockerfile"


def _pyspark_home() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise InfraError("pyspark is not installed in this environment; run: make setup")
    return Path(spec.origin).parent


def local_images(host: ArtifactPaths) -> dict[str, LocalImage]:
    """The local build recipe, from the verified host artifacts (artifacts.verify() first)."""
    lock = artifacts.load_lock()
    cache = cache_dir()
    kafka_pins = lock.jar_sets["kafka-broker"].jars
    jars_dir = _pyspark_home() / "jars"
    spark_jars = sorted(p for p in jars_dir.iterdir() if p.is_file())
    if not spark_jars:
        raise InfraError(f"pyspark's jars directory {jars_dir} is empty; run: make setup")

    def stamp(tool: str) -> str:
        return lock.go_tools[tool].stamp(cache).read_text().strip()

    return {
        "debian": LocalImage("debian", None,
                             pins=(("debootstrap", f"{BASE_SUITE}/{BASE_VARIANT}/recipe-{BASE_RECIPE}"),)),
        "jre": LocalImage("jre", "debian"),
        "kafka": LocalImage("kafka", "jre",
                            files=tuple((f"libs/{p.name}", p) for p in host.kafka_jars),
                            pins=tuple((p.name, kafka_pins[p.name].sha256) for p in host.kafka_jars)),
        "spark": LocalImage("spark", "jre",
                            files=tuple((f"jars/{p.name}", p) for p in spark_jars),
                            pins=(("pyspark", importlib.metadata.version("pyspark")),
                                  *((p.name, str(p.stat().st_size)) for p in spark_jars))),
        "minio": LocalImage("minio", "debian", files=(("minio", host.minio),), pins=(("minio", stamp("minio")),)),
        "toxiproxy": LocalImage("toxiproxy", "debian", files=(("toxiproxy-server", host.toxiproxy),),
                                pins=(("toxiproxy", stamp("toxiproxy")),)),
        "s3proxy": LocalImage("s3proxy", "debian", files=(("s3proxy", host.s3proxy),),
                              pins=(("s3proxy", lock.local_tools["s3proxy"].stamp(cache).read_text().strip()),)),
    }


def local_tags(recipe: dict[str, LocalImage]) -> dict[str, str]:
    """chaos-suite/<name>:<hash of Dockerfile + parent tag + pins>, parents first."""
    tags: dict[str, str] = {}

    def tag(name: str) -> str:
        if name not in tags:
            image = recipe[name]
            inputs = {"pins": list(image.pins), "files": [arc for arc, _ in image.files],
                      "parent": tag(image.parent) if image.parent else None,
                      "dockerfile": image.dockerfile.read_text() if image.parent else None}
            prefix = f"{BASE_SUITE}-" if image.parent is None else ""
            tags[name] = f"{LOCAL_REPOSITORY}/{name}:{prefix}{_short_hash(inputs)}"
        return tags[name]

    for name in recipe:
        tag(name)
    return tags


# -- choosing images ---------------------------------------------------------------------------------------
def resolve(host: ArtifactPaths, client=None, progress: Progress = _stderr, build: bool = True) -> dict[str, str]:
    """The image reference each component runs from; local builds are made when missing (if `build`)."""
    client = client or docker_client()
    chosen = mode()
    refs: dict[str, str] = {}
    wanted_local: list[str] = []
    for component in COMPONENTS:
        if component in LOCAL_ONLY:
            wanted_local.append(component)
            continue
        public = public_image(component)
        if chosen != "local" and _exists(client, public):
            refs[component] = public
        elif chosen == "public":
            refs[component] = _pull(client, public, progress)
        else:
            wanted_local.append(component)
    if wanted_local:
        recipe = local_images(host)
        tags = local_tags(recipe)
        missing = [c for c in wanted_local if not _exists(client, tags[c])]
        if missing and not build:
            raise InfraError(f"image {tags[missing[0]]} is not built; run: {BUILD_FIX}")
        if missing:
            ensure_local(client, recipe, tags, missing, progress)
        refs.update({c: tags[c] for c in wanted_local})
    return refs


def _pull(client, reference: str, progress: Progress) -> str:
    progress(f"pulling {reference} ({MODE_ENV}=public)")
    try:
        client.images.pull(reference)
    except Exception as error:
        raise InfraError(f"cannot pull {reference}: {str(error).splitlines()[0][:160]}; "
                         f"use the local builds: {MODE_ENV}=local") from error
    return reference


# -- building ----------------------------------------------------------------------------------------------
def images_dir() -> Path:
    directory = cache_dir() / "images"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@contextmanager
def _build_lock() -> Iterator[None]:
    """One builder at a time on this machine; a second one waits and then finds the images built."""
    with open(images_dir() / ".build.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_local(client, recipe: dict[str, LocalImage], tags: dict[str, str], wanted: list[str],
                 progress: Progress = _stderr, force: bool = False) -> dict[str, float]:
    """Build the wanted images and the parents they need; return seconds per image actually built."""
    seconds: dict[str, float] = {}
    with _build_lock():
        def build(name: str) -> None:
            image = recipe[name]
            if image.parent:
                build(image.parent)
            if name in seconds or (_exists(client, tags[name]) and not (force and name in wanted)):
                return
            t0 = time.monotonic()
            progress(f"building {tags[name]} (log: {images_dir() / f'build-{name}.log'})")
            if image.parent is None:
                _build_base(client, tags[name])
            else:
                _build_from_dockerfile(client, image, tags[name], tags[image.parent])
            seconds[name] = round(time.monotonic() - t0, 1)
            progress(f"built {tags[name]} in {seconds[name]:.0f} s")
            _remove_older(client, tags[name])

        for name in wanted:
            build(name)
    return seconds


def _labels(tag: str) -> dict[str, str]:
    return {"chaos-suite.image": tag.split("/", 1)[1].split(":")[0], "chaos-suite.inputs": tag.rsplit(":", 1)[1]}


def _build_from_dockerfile(client, image: LocalImage, tag: str, parent_tag: str) -> None:
    log_path = images_dir() / f"build-{image.name}.log"
    with tempfile.TemporaryFile(dir=images_dir()) as context, open(log_path, "w") as log:
        with tarfile.open(fileobj=context, mode="w", dereference=True) as tar:
            tar.add(image.dockerfile, arcname="Dockerfile")
            for arcname, path in image.files:
                tar.add(path, arcname=arcname)
        context.seek(0)
        try:
            # network_mode=host: apt-get inside the build reaches Debian's packages; pull=False: never a registry.
            stream = client.api.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True,
                                      pull=False, network_mode="host", buildargs={"BASE": parent_tag},
                                      labels=_labels(tag), decode=True)
            for chunk in stream:
                if "stream" in chunk:
                    log.write(chunk["stream"])
                if "error" in chunk:
                    log.write(chunk["error"] + "\n")
                    raise InfraError(f"building {tag} failed: {chunk['error'].strip()[:200]}; see {log_path}")
        except InfraError:
            raise
        except Exception as error:
            raise InfraError(f"building {tag} failed: {str(error).splitlines()[0][:200]}; see {log_path}") from error
    if not _exists(client, tag):
        raise InfraError(f"building {tag} produced no image; see {log_path}")


def debian_sources(paths: tuple[Path, ...] = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
                   ) -> tuple[str, str | None]:
    """(archive URI, security URI or None) of the Debian sources this host's apt uses.

    The base image uses the same mirrors as the host, so it reaches whatever Debian mirror this machine is
    configured for; CHAOS_DEBIAN_MIRROR overrides the archive URI.
    """
    entries: list[tuple[str, list[str]]] = []  # (uri, suites)
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(path.glob("*.list")) + sorted(path.glob("*.sources"))
        elif path.is_file():
            files.append(path)
    for file in files:
        text = file.read_text(errors="replace")
        if file.suffix == ".sources":
            for paragraph in re.split(r"\n\s*\n", text):
                fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", paragraph, flags=re.M))
                if fields.get("Enabled", "yes").lower() == "no" or "deb" not in fields.get("Types", "").split():
                    continue
                for uri in fields.get("URIs", "").split():
                    entries.append((uri.rstrip("/"), fields.get("Suites", "").split()))
        else:
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
                if len(words) >= 3 and words[0] == "deb":
                    entries.append((words[1].rstrip("/"), [words[2]]))
    archive = os.environ.get("CHAOS_DEBIAN_MIRROR") or next(
        (uri for uri, suites in entries if BASE_SUITE in suites), None)
    security = next((uri for uri, suites in entries if f"{BASE_SUITE}-security" in suites), None)
    if not archive:
        raise InfraError(f"no Debian {BASE_SUITE} source in this host's apt configuration; "
                         f"set CHAOS_DEBIAN_MIRROR to a Debian mirror URI")
    return archive, security


def _build_base(client, tag: str) -> None:
    """debootstrap a minimal bookworm root file system and import it as an image."""
    if os.geteuid() != 0:
        raise InfraError("building the Debian base image runs debootstrap, which needs root; "
                         f"run as root: {BUILD_FIX}")
    debootstrap = shutil.which("debootstrap") or next(
        (p for p in ("/usr/sbin/debootstrap",) if Path(p).is_file()), None)
    if debootstrap is None:
        raise InfraError("debootstrap is not installed (needed for the local base image); "
                         "run: infra/engine.sh --install")
    if not DEBIAN_KEYRING.is_file():
        raise InfraError(f"{DEBIAN_KEYRING} is missing (debootstrap could not verify what it downloads); "
                         "run: infra/engine.sh --install (installs debian-archive-keyring)")
    archive, security = debian_sources()
    log_path = images_dir() / "build-debian.log"
    rootfs = Path(tempfile.mkdtemp(prefix="rootfs-", dir=images_dir()))
    try:
        with open(log_path, "w") as log:
            # --keyring: a signature that cannot be checked fails the build instead of being skipped.
            done = subprocess.run([debootstrap, f"--variant={BASE_VARIANT}", "--components=main",
                                   f"--keyring={DEBIAN_KEYRING}", BASE_SUITE,
                                   str(rootfs), archive], stdout=log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise InfraError(f"debootstrap of {BASE_SUITE} failed (exit {done.returncode}); see {log_path}")
        sources = (f"Types: deb\nURIs: {archive}\nSuites: {BASE_SUITE} {BASE_SUITE}-updates\nComponents: main\n"
                   f"Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
        if security:
            sources += (f"\nTypes: deb\nURIs: {security}\nSuites: {BASE_SUITE}-security\nComponents: main\n"
                        f"Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
        (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
        (rootfs / "etc/apt/sources.list.d").mkdir(parents=True, exist_ok=True)
        (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(sources)
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / leftover).glob("*"):
                if entry.is_file() and entry.name != "lock":
                    entry.unlink()
        with tempfile.NamedTemporaryFile(suffix=".tar", dir=images_dir()) as archive_file:
            with tarfile.open(fileobj=archive_file, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for entry in sorted(rootfs.iterdir()):
                    if entry.name not in ("proc", "sys", "dev"):
                        tar.add(entry, arcname=entry.name)
                    else:
                        tar.add(entry, arcname=entry.name, recursive=False)
            archive_file.flush()
            repository, version = tag.rsplit(":", 1)
            client.api.import_image_from_file(archive_file.name, repository=repository, tag=version,
                                              changes=['CMD ["/bin/bash"]'] +
                                              [f'LABEL {k}="{v}"' for k, v in _labels(tag).items()])
    finally:
        _unmount_below(rootfs)
        shutil.rmtree(rootfs, ignore_errors=True)
    if not _exists(client, tag):
        raise InfraError(f"importing the debootstrap root file system as {tag} failed; see {log_path}")


def _unmount_below(root: Path) -> None:
    """An interrupted debootstrap can leave /proc or /sys mounted inside its target."""
    try:
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    for mount in sorted((m for m in mounts if m.startswith(str(root) + "/")), reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True)


def _remove_older(client, tag: str) -> None:
    """Builds of the same image with other inputs are dead weight once the new one exists."""
    repository = tag.rsplit(":", 1)[0]
    for image in client.images.list(name=repository):
        if tag not in image.tags:
            for old in image.tags:
                try:
                    client.images.remove(old, noprune=False)
                except Exception:
                    pass  # still used by a container or by a child image: kept, harmless


def remove_local(client) -> int:
    """Remove every local build (for a cold build benchmark); returns how many tags were removed."""
    removed = 0
    for name in ("kafka", "spark", "minio", "toxiproxy", "s3proxy", "jre", "debian"):
        for image in client.images.list(name=f"{LOCAL_REPOSITORY}/{name}"):
            for tag in image.tags:
                client.images.remove(tag, force=True)
                removed += 1
    return removed


def build(force: bool = False, progress: Progress = _stderr) -> dict[str, float]:
    """Build every local image that is missing (or all with `force`); seconds per image built."""
    host = artifacts.verify()
    client = docker_client()
    recipe = local_images(host)
    tags = local_tags(recipe)
    seconds = ensure_local(client, recipe, tags, list(COMPONENTS), progress, force=force)
    if not seconds:
        progress("every local image is built and up to date: " + ", ".join(tags[c] for c in COMPONENTS))
    return seconds


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["build"] and set(argv[1:]) <= {"--force", "--cold"}:
            t0 = time.monotonic()
            if "--cold" in argv:
                _stderr(f"removed {remove_local(docker_client())} local image tags (cold build)")
            seconds = build(force="--force" in argv)
            print(json.dumps({"built_s": seconds, "total_s": round(time.monotonic() - t0, 1)}))
            return 0
        if argv == ["status"]:
            refs = resolve(artifacts.verify(), build=False)
            print(json.dumps(refs, indent=2))
            return 0
    except InfraError as error:
        print(f"images: {error}", file=sys.stderr)
        return 3
    print("usage: python -m infra.images build [--force] [--cold] | status", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
