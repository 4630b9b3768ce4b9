/* clock: moves a process's wall clock by an offset read from a control file, and leaves every other clock alone.

   Preloaded (LD_PRELOAD) into the job's driver: the Python driver and the Spark driver JVM it starts (a child
   inherits the environment). $CHAOS_CLOCK_FILE names the control file: one number, the offset in seconds (signed,
   a fraction allowed, e.g. "-120" or "300.5"); a missing, empty or unreadable file means 0. A writer replaces the
   file whole (write elsewhere, rename over it), so a reader never sees half a number.

   Interposed: clock_gettime for CLOCK_REALTIME and CLOCK_REALTIME_COARSE (OpenJDK 17's System.currentTimeMillis and
   Instant.now, CPython's time.time), gettimeofday and time. CLOCK_MONOTONIC and every other clock pass through
   untouched: a JVM whose monotonic clock moves hangs (libfaketime's tracker), and a jump is a wall-clock event.

   Cost: the JVM reads the clock constantly, so a call does not touch the file. The offset is cached in an atomic;
   at most every REFRESH_NS (by the real monotonic clock) one caller stats the file, and reads it again only when its
   inode, size or modification time changed. Other callers never wait: they take the cached offset. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define REFRESH_NS 20000000LL /* 20 ms: a jump is seen within that, and the stat is ~1 per 20 ms per process */
#define NS_PER_S 1000000000LL

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*gettimeofday_fn)(struct timeval *, void *);
typedef time_t (*time_fn)(time_t *);

static _Atomic(clock_gettime_fn) real_clock_gettime;
static _Atomic(gettimeofday_fn) real_gettimeofday;
static _Atomic(time_fn) real_time;

static _Atomic long long offset_ns;        /* what the wall clock is moved by now */
static _Atomic long long next_refresh_ns;  /* real monotonic time of the next stat */
static atomic_flag refreshing = ATOMIC_FLAG_INIT;
static _Atomic int disabled;               /* no control file named: every call passes through */
static const char *control_path;
static struct stat seen;                   /* the file as last read (only the refreshing caller touches it) */
static int seen_any;

static clock_gettime_fn the_clock_gettime(void) {
    clock_gettime_fn fn = atomic_load_explicit(&real_clock_gettime, memory_order_acquire);
    if (fn == NULL) {
        fn = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
        atomic_store_explicit(&real_clock_gettime, fn, memory_order_release);
    }
    return fn;
}

static long long parse_offset_ns(const char *text) {
    char *end = NULL;
    errno = 0;
    double seconds = strtod(text, &end);
    if (end == text || errno != 0 || seconds != seconds || seconds > 1e9 || seconds < -1e9) {
        return 0;
    }
    return (long long)(seconds * (double)NS_PER_S);
}

static void read_control(void) {
    struct stat now;
    if (stat(control_path, &now) != 0) {
        seen_any = 0;
        atomic_store_explicit(&offset_ns, 0, memory_order_relaxed);
        return;
    }
    if (seen_any && now.st_ino == seen.st_ino && now.st_size == seen.st_size &&
        now.st_mtim.tv_sec == seen.st_mtim.tv_sec && now.st_mtim.tv_nsec == seen.st_mtim.tv_nsec) {
        return;
    }
    char buffer[64];
    ssize_t got = -1;
    int fd = open(control_path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        got = read(fd, buffer, sizeof(buffer) - 1);
        close(fd);
    }
    buffer[got > 0 ? got : 0] = '\0';
    seen = now;
    seen_any = 1;
    atomic_store_explicit(&offset_ns, parse_offset_ns(buffer), memory_order_relaxed);
}

static long long current_offset_ns(void) {
    if (atomic_load_explicit(&disabled, memory_order_relaxed)) {
        return 0;
    }
    if (control_path == NULL) {
        control_path = getenv("CHAOS_CLOCK_FILE");
        if (control_path == NULL || control_path[0] == '\0') {
            atomic_store_explicit(&disabled, 1, memory_order_relaxed);
            return 0;
        }
    }
    struct timespec mono;
    if (the_clock_gettime()(CLOCK_MONOTONIC_COARSE, &mono) == 0) {
        long long now = (long long)mono.tv_sec * NS_PER_S + mono.tv_nsec;
        if (now >= atomic_load_explicit(&next_refresh_ns, memory_order_relaxed) &&
            !atomic_flag_test_and_set_explicit(&refreshing, memory_order_acquire)) {
            read_control();
            atomic_store_explicit(&next_refresh_ns, now + REFRESH_NS, memory_order_relaxed);
            atomic_flag_clear_explicit(&refreshing, memory_order_release);
        }
    }
    return atomic_load_explicit(&offset_ns, memory_order_relaxed);
}

static void shift(struct timespec *ts, long long by_ns) {
    long long total = (long long)ts->tv_sec * NS_PER_S + ts->tv_nsec + by_ns;
    long long sec = total / NS_PER_S, nsec = total % NS_PER_S;
    if (nsec < 0) {
        nsec += NS_PER_S;
        sec -= 1;
    }
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)nsec;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int status = the_clock_gettime()(clock, ts);
    if (status == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        long long by = current_offset_ns();
        if (by != 0) {
            shift(ts, by);
        }
    }
    return status;
}

int gettimeofday(struct timeval *tv, void *tz) {
    gettimeofday_fn fn = atomic_load_explicit(&real_gettimeofday, memory_order_acquire);
    if (fn == NULL) {
        fn = (gettimeofday_fn)dlsym(RTLD_NEXT, "gettimeofday");
        atomic_store_explicit(&real_gettimeofday, fn, memory_order_release);
    }
    int status = fn(tv, tz);
    struct timeval *volatile given = tv; /* declared nonnull, yet NULL is legal: keep the check */
    if (status == 0 && given != NULL) {
        long long by = current_offset_ns();
        if (by != 0) {
            struct timespec ts = {tv->tv_sec, (long)tv->tv_usec * 1000};
            shift(&ts, by);
            tv->tv_sec = ts.tv_sec;
            tv->tv_usec = ts.tv_nsec / 1000;
        }
    }
    return status;
}

time_t time(time_t *out) {
    time_fn fn = atomic_load_explicit(&real_time, memory_order_acquire);
    if (fn == NULL) {
        fn = (time_fn)dlsym(RTLD_NEXT, "time");
        atomic_store_explicit(&real_time, fn, memory_order_release);
    }
    time_t now = fn(NULL);
    if (now != (time_t)-1) {
        struct timespec ts = {now, 0};
        shift(&ts, current_offset_ns());
        now = ts.tv_sec;
    }
    if (out != NULL) {
        *out = now;
    }
    return now;
}
