/*
 * pingpong: the smallest honest TCP request/response pair, the yardstick for linerate's
 * --rr (benches/rr-vs-pingpong.py compiles it with `cc -O2` and runs it beside linerate).
 *
 *   pingpong server PORT REQ RESP [ADDR]         ADDR: 127.0.0.1 (default) or ::1
 *   pingpong client ADDR PORT REQ RESP SECONDS
 *
 * The server accepts one connection and loops: read exactly REQ bytes, write RESP bytes,
 * until the client closes (EOF at a request boundary); then it prints one JSON line with
 * its transactions and CPU and exits. The client connects and runs a closed loop with one
 * transaction in flight: write REQ bytes, read exactly RESP bytes. After SECONDS it closes
 * and prints one JSON line:
 *   {"transactions":N,"transactions_per_second":X,"min_ns":..,"p50_ns":..,"p90_ns":..,
 *    "p99_ns":..,"max_ns":..,"mean_ns":..,"user_us":..,"system_us":..,"cpu_us":..}
 * cpu_us is the client's own user+system time (getrusage), setup included.
 *
 * Both ends set TCP_NODELAY, as linerate does. Loopback only: any address other than
 * 127.0.0.0/8 or ::1 is refused. Bounded: the client stops after SECONDS (and an alarm
 * kills it 30 s later if a peer hangs); the server stops at EOF or after a 60 s alarm.
 *
 * Latency: one CLOCK_MONOTONIC reading per transaction; a transaction's latency is the
 * time from the reading that ended the previous one (or the start) to the end of reading
 * its response, so the (tiny) bookkeeping between transactions counts against the client,
 * never in its favour. Percentiles come from a log-linear histogram: values below 128 ns
 * have a bucket each; above, every power of two is split into 64 equal buckets, so a
 * reported percentile (the midpoint of the bucket holding that rank) is within 1/128
 * (0.8 %) of a true sample value. min, max and mean are exact. Memory stays fixed however
 * long the run: no sample is stored.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_MESSAGE (64L << 20) /* largest request or response accepted, bytes */
#define MAX_SECONDS 3600L
#define SERVER_LIMIT_S 60
#define CLIENT_GRACE_S 30
#define CONNECT_TRIES 100 /* x 20 ms: how long the client waits for the server to listen */

#define SUB_BITS 6 /* 64 buckets per power of two */
#define SUB (1u << SUB_BITS)
#define NBUCKETS (64 * SUB)

static const char *me = "pingpong";

static void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", me, what, strerror(errno));
	exit(1);
}

static void fail(const char *what)
{
	fprintf(stderr, "%s: %s\n", me, what);
	exit(1);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "pingpong: time limit reached, giving up\n";
	if (write(2, msg, sizeof msg - 1) < 0) {
		/* nothing more to do: exiting anyway */
	}
	_exit(3);
}

static long number(const char *s, const char *name, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "%s: %s must be a whole number from %ld to %ld, not '%s'\n", me, name,
			lo, hi, s);
		exit(2);
	}
	return v;
}

/* Fills `ss` with ADDR:PORT; refuses anything but 127.0.0.0/8 and ::1. */
static socklen_t loopback(const char *addr, int port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
		if ((ntohl(v4->sin_addr.s_addr) >> 24) != 127)
			goto refuse;
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		return sizeof *v4;
	}
	if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
		if (!IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr))
			goto refuse;
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		return sizeof *v6;
	}
refuse:
	fprintf(stderr, "%s: refusing address '%s': loopback only (127.x.x.x or ::1)\n", me, addr);
	exit(2);
}

static void nodelay(int fd)
{
	int one = 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one))
		die("setsockopt(TCP_NODELAY)");
}

/* Writes all `n` bytes. */
static void write_all(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t w = write(fd, buf, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("write");
		}
		buf += w;
		n -= (size_t)w;
	}
}

/* Reads exactly `n` bytes. Returns 1, or 0 on EOF before the first byte (a clean end);
 * EOF in the middle of a message is an error. */
static int read_exact(int fd, char *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			die("read");
		}
		if (r == 0) {
			if (got == 0)
				return 0;
			fail("connection closed in the middle of a message");
		}
		got += (size_t)r;
	}
	return 1;
}

static char *buffer(long n)
{
	char *b = malloc((size_t)n);
	if (!b)
		die("malloc");
	for (long i = 0; i < n; i++)
		b[i] = (char)('a' + i % 26);
	return b;
}

static void cpu(long *user_us, long *system_us)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru))
		die("getrusage");
	*user_us = ru.ru_utime.tv_sec * 1000000L + ru.ru_utime.tv_usec;
	*system_us = ru.ru_stime.tv_sec * 1000000L + ru.ru_stime.tv_usec;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- log-linear histogram (see the top comment) --- */

static unsigned bucket_of(uint64_t v)
{
	if (v < 2 * SUB)
		return (unsigned)v;
	unsigned top = 63u - (unsigned)__builtin_clzll(v); /* index of the highest set bit */
	unsigned shift = top - SUB_BITS;
	/* buckets [0, 2*SUB) are exact; each octave above adds SUB buckets */
	return (shift + 1) * SUB + (unsigned)((v >> shift) - SUB);
}

/* The midpoint of bucket `b`, in the units recorded. */
static uint64_t bucket_mid(unsigned b)
{
	if (b < 2 * SUB)
		return b;
	unsigned shift = b / SUB - 1;
	uint64_t lo = ((uint64_t)(b % SUB) + SUB) << shift;
	return lo + (((uint64_t)1 << shift) >> 1);
}

static uint64_t percentile(const uint64_t *h, uint64_t n, unsigned p)
{
	/* the smallest value with at least p % of the samples at or below it: rank ceil(p n / 100) */
	uint64_t rank = (n * p + 99) / 100;
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned b = 0; b < NBUCKETS; b++) {
		seen += h[b];
		if (seen >= rank)
			return bucket_mid(b);
	}
	return 0;
}

/* --- the two ends --- */

static int server(int argc, char **argv)
{
	if (argc != 5 && argc != 6)
		fail("usage: pingpong server PORT REQ RESP [ADDR]");
	int port = (int)number(argv[2], "PORT", 1, 65535);
	long req = number(argv[3], "REQ", 1, MAX_MESSAGE);
	long resp = number(argv[4], "RESP", 1, MAX_MESSAGE);
	struct sockaddr_storage ss;
	socklen_t len = loopback(argc == 6 ? argv[5] : "127.0.0.1", port, &ss);
	signal(SIGALRM, on_alarm);
	alarm(SERVER_LIMIT_S);

	int lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		die("socket");
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, (struct sockaddr *)&ss, len))
		die("bind");
	if (listen(lfd, 1))
		die("listen");
	int fd;
	do
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		die("accept");
	close(lfd);
	nodelay(fd);

	char *in = buffer(req), *out = buffer(resp);
	uint64_t n = 0;
	while (read_exact(fd, in, (size_t)req)) {
		write_all(fd, out, (size_t)resp);
		n++;
	}
	close(fd);
	long user_us, system_us;
	cpu(&user_us, &system_us);
	printf("{\"role\":\"server\",\"transactions\":%llu,\"user_us\":%ld,\"system_us\":%ld,"
	       "\"cpu_us\":%ld}\n",
	       (unsigned long long)n, user_us, system_us, user_us + system_us);
	return 0;
}

static int client(int argc, char **argv)
{
	if (argc != 7)
		fail("usage: pingpong client ADDR PORT REQ RESP SECONDS");
	int port = (int)number(argv[3], "PORT", 1, 65535);
	long req = number(argv[4], "REQ", 1, MAX_MESSAGE);
	long resp = number(argv[5], "RESP", 1, MAX_MESSAGE);
	long seconds = number(argv[6], "SECONDS", 1, MAX_SECONDS);
	struct sockaddr_storage ss;
	socklen_t len = loopback(argv[2], port, &ss);
	signal(SIGALRM, on_alarm);
	alarm((unsigned)(seconds + CLIENT_GRACE_S));
	signal(SIGPIPE, SIG_IGN); /* a vanished server shows as a write error, not a silent death */

	int fd = -1;
	for (int i = 0;; i++) {
		fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die("socket");
		if (connect(fd, (struct sockaddr *)&ss, len) == 0)
			break;
		if (errno != ECONNREFUSED || i + 1 >= CONNECT_TRIES)
			die("connect");
		close(fd);
		struct timespec pause = {0, 20 * 1000 * 1000};
		nanosleep(&pause, NULL);
	}
	nodelay(fd);

	char *out = buffer(req), *in = buffer(resp);
	uint64_t *hist = calloc(NBUCKETS, sizeof *hist);
	if (!hist)
		die("calloc");
	uint64_t n = 0, sum = 0, lo = UINT64_MAX, hi = 0;
	const uint64_t start = now_ns(), end = start + (uint64_t)seconds * 1000000000u;
	uint64_t t = start;
	while (t < end) {
		write_all(fd, out, (size_t)req);
		if (!read_exact(fd, in, (size_t)resp))
			fail("the server closed the connection");
		uint64_t t1 = now_ns(), lat = t1 - t;
		t = t1;
		hist[bucket_of(lat)]++;
		sum += lat;
		lo = lat < lo ? lat : lo;
		hi = lat > hi ? lat : hi;
		n++;
	}
	close(fd);
	if (n == 0)
		fail("no transaction completed");
	long user_us, system_us;
	cpu(&user_us, &system_us);
	double elapsed = (double)(t - start) / 1e9;
	printf("{\"transactions\":%llu,\"transactions_per_second\":%.2f,\"min_ns\":%llu,"
	       "\"p50_ns\":%llu,\"p90_ns\":%llu,\"p99_ns\":%llu,\"max_ns\":%llu,\"mean_ns\":%llu,"
	       "\"user_us\":%ld,\"system_us\":%ld,\"cpu_us\":%ld}\n",
	       (unsigned long long)n, (double)n / elapsed, (unsigned long long)lo,
	       (unsigned long long)percentile(hist, n, 50), (unsigned long long)percentile(hist, n, 90),
	       (unsigned long long)percentile(hist, n, 99), (unsigned long long)hi,
	       (unsigned long long)(sum / n), user_us, system_us, user_us + system_us);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "server") == 0)
		return server(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "client") == 0)
		return client(argc, argv);
	fprintf(stderr, "usage: pingpong server PORT REQ RESP [ADDR]\n"
			"       pingpong client ADDR PORT REQ RESP SECONDS\n");
	return 2;
}
