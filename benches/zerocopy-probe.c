/*
 * zerocopy-probe: does MSG_ZEROCOPY pay for a TCP bulk sender on this path?
 *
 *   zerocopy-probe recv PORT SECONDS
 *   zerocopy-probe send ADDR PORT SECONDS copy|zerocopy [WRITE_BYTES]
 *
 * The receiver reads everything in 1 MiB calls (a real receiver: every byte is copied out),
 * woken per 512 KiB (SO_RCVLOWAT), and closes at the end. The sender writes
 * WRITE_BYTES (default 1 MiB) a call under a 128 KiB unsent-queue limit (as linerate's
 * senders do), with plain copies or with MSG_ZEROCOPY (SO_ZEROCOPY on the socket; the
 * completions on the error queue are drained as they come, and the one buffer is reused,
 * since only the cost is measured here, not the bytes). Once the receiver has closed (every
 * byte read) it prints the bytes, the seconds from its connect to that close, and how many
 * completions said the kernel copied after all (SO_EE_CODE_ZEROCOPY_COPIED). Both ends' CPU
 * time is their caller's to measure (benchlib reaps them with wait4).
 *
 * benches/zerocopy-veth.py runs both modes interleaved between two namespaces. Send only to
 * loopback or to namespaces of your own.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* Reads the error queue without waiting; counts completions and those the kernel copied. */
static void drain(int fd, long *done, long *copied) {
    char control[128];
    for (;;) {
        struct msghdr m = {0};
        m.msg_control = control;
        m.msg_controllen = sizeof control;
        if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            struct sock_extended_err *e = (struct sock_extended_err *)CMSG_DATA(c);
            if (e->ee_origin != SO_EE_ORIGIN_ZEROCOPY) continue;
            long n = (long)e->ee_data - (long)e->ee_info + 1;
            *done += n;
            if (e->ee_code & SO_EE_CODE_ZEROCOPY_COPIED) *copied += n;
        }
    }
}

static int do_recv(int port, double seconds) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1)) die("listen");
    struct timeval limit = {.tv_sec = (long)seconds + 10};
    setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    int fd = accept(l, NULL, NULL);
    if (fd < 0) die("accept");
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    /* Woken per 512 KiB, not per segment, as linerate's receivers are at these rates: each
     * wake-up costs the sending core, which runs the veth's delivery. */
    int lowat = 512 * 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
    size_t size = 1 << 20;
    char *buf = malloc(size);
    while (read(fd, buf, size) > 0) {
    }
    close(fd);
    return 0;
}

static int do_send(const char *addr, int port, double seconds, int zerocopy, size_t size) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, lowat = 128 * 1024;
    if (zerocopy && setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one))
        die("SO_ZEROCOPY");
    setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, addr, &a.sin_addr) != 1) die("address");
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) die("connect");
    char *buf = malloc(size);
    for (size_t i = 0; i < size; i++) buf[i] = (char)(i * 131 + 7);
    double t0 = now(), end = t0 + seconds;
    long long sent = 0;
    long calls = 0, done = 0, copied = 0;
    while (now() < end) {
        ssize_t n = send(fd, buf, size, zerocopy ? MSG_ZEROCOPY : 0);
        if (n < 0) {
            if (errno == ENOBUFS && zerocopy) {
                drain(fd, &done, &copied);
                continue;
            }
            die("send");
        }
        sent += n;
        calls++;
        if (zerocopy) drain(fd, &done, &copied);
    }
    shutdown(fd, SHUT_WR);
    char sink[256];
    while (read(fd, sink, sizeof sink) > 0) {
    }
    double took = now() - t0;
    if (zerocopy) drain(fd, &done, &copied);
    printf("{\"bytes\": %lld, \"seconds\": %.6f, \"calls\": %ld, \"completions\": %ld, "
           "\"copied\": %ld}\n",
           sent, took, calls, done, copied);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "recv")) return do_recv(atoi(argv[2]), atof(argv[3]));
    if ((argc == 6 || argc == 7) && !strcmp(argv[1], "send")) {
        size_t size = argc == 7 ? strtoul(argv[6], NULL, 10) : 1 << 20;
        return do_send(argv[2], atoi(argv[3]), atof(argv[4]), !strcmp(argv[5], "zerocopy"),
                       size);
    }
    fprintf(stderr, "usage: %s recv PORT SECONDS | send ADDR PORT SECONDS copy|zerocopy [BYTES]\n",
            argv[0]);
    return 2;
}
