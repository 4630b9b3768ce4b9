/* redirect: connect() to a loopback address on port A goes to the same address on port B instead.
 *
 * Preloaded (LD_PRELOAD) into one Spark worker, and so into every executor it launches, it sends that worker's
 * connections to the driver through proxies of its own: a fault on them cuts the driver off from this worker
 * alone (chaos/faults/network.py, target spark-driver-worker-N).
 *
 * CHAOS_REDIRECT="A:B,C:D" lists the port pairs. Only loopback destinations are rewritten (127.0.0.0/8, their
 * IPv4-mapped IPv6 form ::ffff:127.x.x.x, which Java's dual-stack sockets use, and ::1); everything else passes
 * through untouched. A malformed CHAOS_REDIRECT ends the process with exit 97 and a message: a redirect that
 * silently did nothing would make a partition that is no partition.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ENV_NAME "CHAOS_REDIRECT"
#define MAX_PAIRS 16
#define MALFORMED_EXIT 97

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

static connect_fn real_connect;
static unsigned short from_port[MAX_PAIRS], to_port[MAX_PAIRS];  /* host byte order */
static int pairs;

static void malformed(const char *value, const char *why) {
    fprintf(stderr, "redirect shim: %s=\"%s\" is malformed (%s); expected \"A:B,C:D\" with ports 1-65535\n",
            ENV_NAME, value, why);
    _exit(MALFORMED_EXIT);
}

static unsigned short parse_port(const char *value, const char **cursor) {
    char *end;
    errno = 0;
    long port = strtol(*cursor, &end, 10);
    if (end == *cursor || errno != 0 || port < 1 || port > 65535)
        malformed(value, "not a port");
    *cursor = end;
    return (unsigned short)port;
}

__attribute__((constructor)) static void load_pairs(void) {
    real_connect = (connect_fn)dlsym(RTLD_NEXT, "connect");
    const char *value = getenv(ENV_NAME);
    if (value == NULL || *value == '\0')
        return;
    const char *cursor = value;
    for (;;) {
        if (pairs == MAX_PAIRS)
            malformed(value, "too many pairs");
        from_port[pairs] = parse_port(value, &cursor);
        if (*cursor++ != ':')
            malformed(value, "a pair needs a colon");
        to_port[pairs] = parse_port(value, &cursor);
        pairs++;
        if (*cursor == '\0')
            return;
        if (*cursor++ != ',')
            malformed(value, "pairs are separated by commas");
    }
}

/* The port `port` (network byte order) is redirected to, in network byte order; 0 when it is not. */
static in_port_t redirected(in_port_t port) {
    for (int i = 0; i < pairs; i++)
        if (ntohs(port) == from_port[i])
            return htons(to_port[i]);
    return 0;
}

static int loopback_v4(const struct in_addr *address) {
    return (ntohl(address->s_addr) >> 24) == 127;
}

int connect(int fd, const struct sockaddr *address, socklen_t length) {
    if (real_connect == NULL) {
        real_connect = (connect_fn)dlsym(RTLD_NEXT, "connect");
        if (real_connect == NULL) {
            errno = ENOSYS;
            return -1;
        }
    }
    if (address == NULL || pairs == 0)
        return real_connect(fd, address, length);
    if (address->sa_family == AF_INET && length >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in target;
        memcpy(&target, address, sizeof target);
        in_port_t port = redirected(target.sin_port);
        if (port != 0 && loopback_v4(&target.sin_addr)) {
            target.sin_port = port;
            return real_connect(fd, (const struct sockaddr *)&target, sizeof target);
        }
    } else if (address->sa_family == AF_INET6 && length >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 target;
        memcpy(&target, address, sizeof target);
        in_port_t port = redirected(target.sin6_port);
        const struct in6_addr *a = &target.sin6_addr;
        int loopback = IN6_IS_ADDR_LOOPBACK(a) ||
                       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
        if (port != 0 && loopback) {
            target.sin6_port = port;
            return real_connect(fd, (const struct sockaddr *)&target, sizeof target);
        }
    }
    return real_connect(fd, address, length);
}
