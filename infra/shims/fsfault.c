/* fsfault: fail file calls under one directory with ENOSPC or EIO, while a control file says so.
 *
 * Preloaded (LD_PRELOAD) into a Spark worker, inherited by the executors it launches: RocksDB's JNI library and the
 * JVM's own file I/O call these libc functions, so a full or failing disk can be played under RocksDB's local
 * directory only, while the rest of the executor's disk (shuffle files, logs) keeps working.
 *
 * Environment, read once at load:
 *   FSFAULT_CONTROL  the control file (unset: the library passes every call through)
 *   FSFAULT_PREFIX   only paths starting with it are candidates (unset: none)
 *   FSFAULT_MATCH    and, if set, only those whose rest (after the prefix) contains it, e.g. "/StateStoreId("
 * The control file holds one line "<ERRNO> <CALLS>": ERRNO is ENOSPC or EIO, CALLS is write, read or all. A missing
 * file, an empty one or "off" passes everything through. It is stat()ed at most every 50 ms (CLOCK_MONOTONIC), so a
 * running process is switched on and off by rewriting it.
 *
 * Whether a descriptor is under the prefix is decided when it is opened, never on each call: a write to another file
 * costs one array load. Files already open when the fault is switched on are failed too (RocksDB keeps its WAL and
 * MANIFEST open). Opening itself never fails: a full disk still lets files be created; their writes fail.
 * Not covered: stdio (fopen/fwrite: RocksDB's info LOG), mmap'ed reads (off by default in RocksDB), descriptors made
 * by dup. A descriptor closed by a call not wrapped here (fclose, close_range) keeps its mark until its number is
 * opened again through a wrapped call: while a fault is on, whatever reuses that number meanwhile (a socket) fails too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_FDS 65536
#define CHECK_EVERY_NS 50000000L
#define CALLS_WRITE 1
#define CALLS_READ 2

static unsigned char tracked[MAX_FDS];  /* 1: this descriptor was opened under the prefix (atomic byte accesses) */
static char prefix[PATH_MAX];
static size_t prefix_len;
static char match[256];
static char control[PATH_MAX];
static int enabled;  /* FSFAULT_CONTROL and FSFAULT_PREFIX both set */

/* The fault in force: errno (0: none) and the calls it fails; refreshed from the control file. */
static int fault_errno;
static int fault_calls;
static long next_check_ns;
static struct stat seen;  /* the control file's identity when last read (st_ino 0: absent) */
static int announced;     /* the first injected failure since the fault was switched on was written to stderr */
static pthread_mutex_t refresh_lock = PTHREAD_MUTEX_INITIALIZER;

#define REAL(name) static __typeof__(name) *real_##name; \
    if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

__attribute__((constructor)) static void fsfault_init(void) {
    const char *c = getenv("FSFAULT_CONTROL"), *p = getenv("FSFAULT_PREFIX"), *m = getenv("FSFAULT_MATCH");
    if (!c || !*c || !p || !*p || strlen(c) >= sizeof control || strlen(p) >= sizeof prefix) return;
    if (m && strlen(m) >= sizeof match) return;
    strcpy(control, c);
    strcpy(prefix, p);
    prefix_len = strlen(prefix);
    if (m) strcpy(match, m);
    enabled = 1;
}

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Raw syscalls: the library's own I/O must not go through its own wrappers. */
static void say(const char *text) {
    syscall(SYS_write, 2, text, strlen(text));
}

static void read_control(void) {
    int err = 0, calls = 0;
    char text[64] = {0}, name[16] = {0}, which[16] = {0};
    int fd = (int)syscall(SYS_openat, AT_FDCWD, control, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        long n = syscall(SYS_read, fd, text, sizeof text - 1);
        syscall(SYS_close, fd);
        if (n > 0 && sscanf(text, "%15s %15s", name, which) == 2) {
            err = !strcmp(name, "ENOSPC") ? ENOSPC : !strcmp(name, "EIO") ? EIO : 0;
            calls = !strcmp(which, "write") ? CALLS_WRITE : !strcmp(which, "read") ? CALLS_READ
                  : !strcmp(which, "all") ? (CALLS_WRITE | CALLS_READ) : 0;
        }
    }
    if (!err || !calls) err = calls = 0;
    if (err != __atomic_load_n(&fault_errno, __ATOMIC_RELAXED)) __atomic_store_n(&announced, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&fault_calls, calls, __ATOMIC_RELAXED);
    __atomic_store_n(&fault_errno, err, __ATOMIC_RELEASE);
}

/* Re-read the control file if it changed, at most every CHECK_EVERY_NS; a thread that finds another refreshing
 * goes on with the fault as it was. */
static void refresh(void) {
    long now = now_ns();
    if (now < __atomic_load_n(&next_check_ns, __ATOMIC_RELAXED)) return;
    if (pthread_mutex_trylock(&refresh_lock) != 0) return;
    __atomic_store_n(&next_check_ns, now + CHECK_EVERY_NS, __ATOMIC_RELAXED);
    struct stat now_st;
    if (syscall(SYS_newfstatat, AT_FDCWD, control, &now_st, 0) != 0) memset(&now_st, 0, sizeof now_st);
    if (now_st.st_ino != seen.st_ino || now_st.st_dev != seen.st_dev || now_st.st_size != seen.st_size
        || now_st.st_mtim.tv_sec != seen.st_mtim.tv_sec || now_st.st_mtim.tv_nsec != seen.st_mtim.tv_nsec) {
        seen = now_st;
        read_control();
    }
    pthread_mutex_unlock(&refresh_lock);
}

/* The errno this call on `fd` must fail with, or 0 to pass it through. */
static int injected(int fd, int calls, const char *call) {
    if (fd < 0 || fd >= MAX_FDS || !__atomic_load_n(&tracked[fd], __ATOMIC_RELAXED)) return 0;
    refresh();
    int err = __atomic_load_n(&fault_errno, __ATOMIC_ACQUIRE);
    if (!err || !(__atomic_load_n(&fault_calls, __ATOMIC_RELAXED) & calls)) return 0;
    if (!__atomic_exchange_n(&announced, 1, __ATOMIC_RELAXED)) {
        char link[64], path[PATH_MAX] = "?", line[PATH_MAX + 160];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        long n = syscall(SYS_readlinkat, AT_FDCWD, link, path, sizeof path - 1);
        if (n > 0) path[n] = 0;
        snprintf(line, sizeof line, "fsfault: injected %s on %s (pid %d): first failed call %s\n",
                 err == ENOSPC ? "ENOSPC" : "EIO", path, (int)getpid(), call);
        say(line);
    }
    return err;
}

static int under_prefix(int dirfd, const char *path) {
    char full[PATH_MAX];
    if (!path) return 0;
    if (path[0] != '/') {
        char base[PATH_MAX];
        long n;
        if (dirfd == AT_FDCWD) {
            n = syscall(SYS_getcwd, base, sizeof base);
            n = n > 0 ? (long)strlen(base) : -1;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            n = syscall(SYS_readlinkat, AT_FDCWD, link, base, sizeof base - 1);
        }
        if (n <= 0) return 0;
        base[n] = 0;
        if (snprintf(full, sizeof full, "%s/%s", base, path) >= (int)sizeof full) return 0;
        path = full;
    }
    if (strncmp(path, prefix, prefix_len) != 0) return 0;
    return !match[0] || strstr(path + prefix_len, match) != NULL;
}

static int opened(int fd, int dirfd, const char *path) {
    if (enabled && fd >= 0 && fd < MAX_FDS)
        __atomic_store_n(&tracked[fd], (unsigned char)under_prefix(dirfd, path), __ATOMIC_RELAXED);
    return fd;
}

static int has_mode(int flags) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

int open(const char *path, int flags, ...) {
    REAL(open);
    mode_t mode = 0;
    if (has_mode(flags)) { va_list a; va_start(a, flags); mode = va_arg(a, mode_t); va_end(a); }
    return opened(real_open(path, flags, mode), AT_FDCWD, path);
}

int open64(const char *path, int flags, ...) {
    REAL(open64);
    mode_t mode = 0;
    if (has_mode(flags)) { va_list a; va_start(a, flags); mode = va_arg(a, mode_t); va_end(a); }
    return opened(real_open64(path, flags, mode), AT_FDCWD, path);
}

int openat(int dirfd, const char *path, int flags, ...) {
    REAL(openat);
    mode_t mode = 0;
    if (has_mode(flags)) { va_list a; va_start(a, flags); mode = va_arg(a, mode_t); va_end(a); }
    return opened(real_openat(dirfd, path, flags, mode), dirfd, path);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    REAL(openat64);
    mode_t mode = 0;
    if (has_mode(flags)) { va_list a; va_start(a, flags); mode = va_arg(a, mode_t); va_end(a); }
    return opened(real_openat64(dirfd, path, flags, mode), dirfd, path);
}

int creat(const char *path, mode_t mode) {
    REAL(creat);
    return opened(real_creat(path, mode), AT_FDCWD, path);
}

int creat64(const char *path, mode_t mode) {
    REAL(creat64);
    return opened(real_creat64(path, mode), AT_FDCWD, path);
}

int close(int fd) {
    REAL(close);
    if (fd >= 0 && fd < MAX_FDS) __atomic_store_n(&tracked[fd], 0, __ATOMIC_RELAXED);
    return real_close(fd);
}

#define FAIL_IF(fd, calls, call) do { int e_ = injected((fd), (calls), (call)); \
    if (e_) { errno = e_; return -1; } } while (0)

ssize_t write(int fd, const void *buf, size_t n) {
    REAL(write);
    FAIL_IF(fd, CALLS_WRITE, "write");
    return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite);
    FAIL_IF(fd, CALLS_WRITE, "pwrite");
    return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) {
    REAL(pwrite64);
    FAIL_IF(fd, CALLS_WRITE, "pwrite64");
    return real_pwrite64(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int count) {
    REAL(writev);
    FAIL_IF(fd, CALLS_WRITE, "writev");
    return real_writev(fd, iov, count);
}

ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t off) {
    REAL(pwritev);
    FAIL_IF(fd, CALLS_WRITE, "pwritev");
    return real_pwritev(fd, iov, count, off);
}

int fsync(int fd) {
    REAL(fsync);
    FAIL_IF(fd, CALLS_WRITE, "fsync");
    return real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(fdatasync);
    FAIL_IF(fd, CALLS_WRITE, "fdatasync");
    return real_fdatasync(fd);
}

int sync_file_range(int fd, off64_t off, off64_t n, unsigned int flags) {
    REAL(sync_file_range);
    FAIL_IF(fd, CALLS_WRITE, "sync_file_range");
    return real_sync_file_range(fd, off, n, flags);
}

int fallocate(int fd, int mode, off_t off, off_t n) {
    REAL(fallocate);
    FAIL_IF(fd, CALLS_WRITE, "fallocate");
    return real_fallocate(fd, mode, off, n);
}

int fallocate64(int fd, int mode, off64_t off, off64_t n) {
    REAL(fallocate64);
    FAIL_IF(fd, CALLS_WRITE, "fallocate64");
    return real_fallocate64(fd, mode, off, n);
}

/* posix_fallocate returns the error instead of setting errno. */
int posix_fallocate(int fd, off_t off, off_t n) {
    REAL(posix_fallocate);
    int e = injected(fd, CALLS_WRITE, "posix_fallocate");
    return e ? e : real_posix_fallocate(fd, off, n);
}

int posix_fallocate64(int fd, off64_t off, off64_t n) {
    REAL(posix_fallocate64);
    int e = injected(fd, CALLS_WRITE, "posix_fallocate64");
    return e ? e : real_posix_fallocate64(fd, off, n);
}

ssize_t read(int fd, void *buf, size_t n) {
    REAL(read);
    FAIL_IF(fd, CALLS_READ, "read");
    return real_read(fd, buf, n);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off) {
    REAL(pread);
    FAIL_IF(fd, CALLS_READ, "pread");
    return real_pread(fd, buf, n, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off64_t off) {
    REAL(pread64);
    FAIL_IF(fd, CALLS_READ, "pread64");
    return real_pread64(fd, buf, n, off);
}

ssize_t readv(int fd, const struct iovec *iov, int count) {
    REAL(readv);
    FAIL_IF(fd, CALLS_READ, "readv");
    return real_readv(fd, iov, count);
}

ssize_t preadv(int fd, const struct iovec *iov, int count, off_t off) {
    REAL(preadv);
    FAIL_IF(fd, CALLS_READ, "preadv");
    return real_preadv(fd, iov, count, off);
}
