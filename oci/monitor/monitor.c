// The running half of a container's monitor, and the one writer of its CRI
// log. See monitor.go for why it is C and how it is reached; the Go writer in
// crilog_oracle_test.go is the tests' oracle, which it mirrors entry for
// entry, and the tests hold the two to the same output. Where no C monitor
// runs, the Go monitor calls staticpodd_drain_log (drain_linux.go), the same
// writer run to the pipes' end: after a start that failed, and in the exit
// recorder once it has killed what was left of the container.
//
// argv: <name> __staticpodd_monitor_running <id> <log> <log-dir-fd> <maxSize>
//       <maxFiles> <rotation-file> <init-pid> <stdout-fd> <stderr-fd>
//       <gzip-arg> <finish-argv...>
// fds:  1, 2 the monitor's own log; the container's stdout and stderr pipes;
//       the log's directory, as the Go monitor opened it beneath the pod log
//       directory, which the gzip helper and the exit recorder inherit. Every
//       file of the log is opened, renamed and removed in that directory by
//       name (*at calls), never through <log>, which only names the log in
//       messages: a container that swapped its log directory for a symlink
//       does not move them onto the host.
//       SIGCHLD and SIGHUP arrive blocked.
//
// It copies both pipes into the CRI log file and rotates it, reaps every
// child (the container's init, the orphans a container leaves to a
// subreaper, its gzip helper), re-reads the rotation file on SIGHUP, and once
// init has exited and the pipes are drained, execs
//   /proc/self/exe <finish-argv...> <wait-status> <finished-unix-ns> <maxSize> <maxFiles>
// with the pipes still open on the same fds: the Go monitor records the exit and
// destroys the container. It never returns into Go.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUNNING_ARG "__staticpodd_monitor_running"
#define MAX_LOG_LINE (16 * 1024) // MaxLogLine
#define COPY_BUFFER (64 * 1024)  // copyBuffer
#define FLUSH_AT (256 * 1024)    // entries buffered before a write, within one read
#define DRAIN_READS 16           // reads of each pipe once init has exited
#define GZIP_GONE 3              // the gzip helper's exit code when its source is gone (gzipGone)
#define STAMP_FORMAT "%Y%m%d-%H%M%S" // podspec.RotatedLogTimeFormat
#define STAMP_MAX 64
#define ROTATION_SIZE 16              // monitor.RotationSize
#define MAX_ROTATION_FILES (1 << 20)  // monitor.maxRotationFiles

struct rotated {
	char stamp[STAMP_MAX];
	int gz;
};

struct stream {
	int fd;
	const char *name;
	char *buf;
	size_t held; // buf[:held] is the start of a line
};

static const char *ctr_id, *log_path, *log_name, *dir_fd_arg, *rotation_file, *gzip_arg, *prog_name;
static int dir_fd = -1; // the log's directory: every name below is in it
static char **finish_argv;
static int finish_argc;

// The log: criLog's fields.
static int log_fd = -1;
static long long max_size, rotate_at, size;
static int max_files;
static struct rotated *rot;
static int nrot, caprot;
static int rotate_failed, failing;
static long lost;
static char *wbuf;
static size_t wlen, wcap;
static long wentries;

// The gzip helper: at most one at a time, on the oldest uncompressed
// rotated file but the newest.
static pid_t gz_pid;
static int gz_pidfd = -1; // gz_pid's, for staticpodd_drain_log, which takes no SIGCHLD
static char gz_stamp[STAMP_MAX];
static int gz_due, gz_failing;

static int read_errno; // the first failed read of a pipe

static pid_t init_pid;
static int init_exited, init_status;
static struct timespec finished;

static void die(const char *what) __attribute__((noreturn));

// say writes one line in the form of the Go monitor's slog text handler.
static void say(const char *level, const char *msg, const char *fmt, ...) {
	char when[64];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(when + n, sizeof when - n, ".%03ld", ts.tv_nsec / 1000000);
	n = strlen(when);
	strftime(when + n, sizeof when - n, "%z", &tm);
	// %z is +0000; RFC 3339 wants +00:00 (or Z, as Go writes UTC).
	n = strlen(when);
	if (n >= 5 && strcmp(when + n - 5, "+0000") == 0) {
		strcpy(when + n - 5, "Z");
	} else if (n >= 5) {
		memmove(when + n - 1, when + n - 2, 3);
		when[n - 2] = ':';
	}
	char attrs[1024] = "";
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(attrs, sizeof attrs, fmt, ap);
		va_end(ap);
	}
	dprintf(2, "time=%s level=%s msg=\"%s\" container=%s%s%s\n", when, level, msg, ctr_id,
		attrs[0] ? " " : "", attrs);
}

static void die(const char *what) {
	say("ERROR", "monitor failed", "err=\"%s: %s\"", what, strerror(errno));
	_exit(1);
}

static void *grow(void *p, size_t n) {
	void *q = realloc(p, n);
	if (!q)
		die("allocate");
	return q;
}

// append_time appends t as Go's time.RFC3339Nano in UTC: no trailing zeros
// in the fraction, no fraction at all when it is zero.
static size_t format_time(char *b, const struct timespec *t) {
	struct tm tm;
	gmtime_r(&t->tv_sec, &tm);
	size_t n = strftime(b, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	if (t->tv_nsec) {
		char f[16];
		snprintf(f, sizeof f, ".%09ld", t->tv_nsec);
		size_t k = 10;
		while (f[k - 1] == '0')
			k--;
		memcpy(b + n, f, k);
		n += k;
	}
	b[n++] = 'Z';
	return n;
}

// rotated_path names a rotated file in dir_fd; a name that does not fit
// fails with ENAMETOOLONG rather than being cut (cut names would collide).
static int rotated_path(char *b, size_t n, const char *stamp, const char *suffix) {
	if ((size_t)snprintf(b, n, "%s.%s%s", log_name, stamp, suffix) >= n) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

// open_live opens (creates) the live log in dir_fd when it is a regular
// file, as logfiles.OpenRegularAt does: the name is looked up with O_PATH,
// which opens nothing, and only a regular file is opened, through
// /proc/self/fd; a missing one is made with O_EXCL. A device node or FIFO
// that a container planted under the name is never opened or written.
static int open_live(void) {
	for (int i = 0; i < 3; i++) {
		int p = openat(dir_fd, log_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (p < 0 && errno == ENOENT) {
			int fd = openat(dir_fd, log_name, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
			if (fd < 0 && errno == EEXIST)
				continue; // made meanwhile: looked at again
			return fd;
		}
		if (p < 0)
			return -1;
		struct stat st;
		int fd = -1;
		if (fstat(p, &st) < 0) {
			// errno says why
		} else if (S_ISLNK(st.st_mode)) {
			errno = ELOOP;
		} else if (!S_ISREG(st.st_mode)) {
			errno = EINVAL;
		} else {
			char proc[32];
			snprintf(proc, sizeof proc, "/proc/self/fd/%d", p);
			fd = open(proc, O_WRONLY | O_APPEND | O_CLOEXEC);
		}
		int err = errno;
		close(p);
		errno = err;
		return fd;
	}
	errno = EEXIST;
	return -1;
}

static int remove_if_exists(const char *p) {
	if (unlinkat(dir_fd, p, 0) < 0 && errno != ENOENT)
		return -1;
	return 0;
}

// remove_rotated removes rotated file i, compressed or not.
static int remove_rotated(int i) {
	char p[PATH_MAX];
	if (rotated_path(p, sizeof p, rot[i].stamp, ".gz") < 0 || remove_if_exists(p) < 0)
		return -1;
	if (rotated_path(p, sizeof p, rot[i].stamp, "") < 0)
		return -1;
	return remove_if_exists(p);
}

// drop_oldest forgets the n oldest rotated files, removed already.
static void drop_oldest(int n) {
	memmove(rot, rot + n, (size_t)(nrot - n) * sizeof *rot);
	nrot -= n;
}

// trim_rotated removes the oldest rotated files until at most keep are
// left, and forgets them at once (not one by one: the list may be long).
static int trim_rotated(int keep) {
	int n = 0;
	int rc = 0;
	while (nrot - n > keep) {
		if (remove_rotated(n) < 0) {
			rc = -1;
			break;
		}
		n++;
	}
	if (n > 0)
		drop_oldest(n);
	return rc;
}

static void add_rotated(const char *stamp, int gz) {
	if (strlen(stamp) >= STAMP_MAX)
		return; // not a name of ours, nor one it could make
	if (nrot == caprot) {
		caprot = caprot ? 2 * caprot : 8;
		rot = grow(rot, (size_t)caprot * sizeof *rot);
	}
	snprintf(rot[nrot].stamp, STAMP_MAX, "%s", stamp);
	rot[nrot].gz = gz;
	nrot++;
}

static int find_rotated(const char *stamp) {
	for (int i = 0; i < nrot; i++)
		if (strcmp(rot[i].stamp, stamp) == 0)
			return i;
	return -1;
}

static void gzip_start_pass(void);

// write_buffered writes the entries buffered to the live file (criLog.writeLocked).
static void write_buffered(void) {
	if (wlen == 0)
		return;
	size_t done = 0;
	int err = 0;
	while (done < wlen) {
		ssize_t w = write(log_fd, wbuf + done, wlen - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			err = w < 0 ? errno : EIO;
			break;
		}
		done += (size_t)w;
	}
	size += (long long)done;
	if (err && !failing) {
		failing = 1;
		lost = wentries;
		say("WARN", "cannot write container log, discarding output until it can", "path=%s err=\"%s\"",
		    log_path, strerror(err));
	} else if (err) {
		lost += wentries;
	} else if (failing) {
		failing = 0;
		say("INFO", "writing container log again", "path=%s lost_entries=%ld", log_path, lost);
	}
	wlen = 0;
	wentries = 0;
}

static void rotation_failed(int err) {
	rotate_at = size + max_size;
	if (!rotate_failed) {
		rotate_failed = 1;
		say("WARN", "cannot rotate container log, writing on to the live file", "path=%s err=\"%s\"",
		    log_path, strerror(err));
	}
}

// parse_stamp reads a stamp of ours (STAMP_FORMAT, whole) as seconds.
static int parse_stamp(const char *stamp, time_t *t) {
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	const char *end = strptime(stamp, STAMP_FORMAT, &tm);
	char again[STAMP_MAX];
	if (!end || *end || !strftime(again, sizeof again, STAMP_FORMAT, &tm) || strcmp(again, stamp) != 0)
		return -1;
	*t = timegm(&tm);
	return 0;
}

// next_stamp is criLog.nextStamp: the local time now, or one second after
// the newest rotated file's when that is not earlier. Names not of the
// stamp's form (an operator's <log>.bak) are passed over, and a name in use
// is never taken again.
static void next_stamp(char *b) {
	time_t t = time(NULL), newest = 0;
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(b, STAMP_MAX, STAMP_FORMAT, &tm);
	int have = 0;
	for (int i = 0; i < nrot; i++) {
		time_t v;
		if (parse_stamp(rot[i].stamp, &v) == 0 && (!have || v > newest)) {
			newest = v;
			have = 1;
		}
	}
	// Wall-clock arithmetic on the names: UTC has no daylight saving jumps.
	char n[STAMP_MAX];
	if (have && (gmtime_r(&newest, &tm), strftime(n, sizeof n, STAMP_FORMAT, &tm), strcmp(b, n) <= 0))
		t = newest + 1;
	else if (parse_stamp(b, &t) < 0)
		return;
	for (;;) {
		gmtime_r(&t, &tm);
		strftime(b, STAMP_MAX, STAMP_FORMAT, &tm);
		if (find_rotated(b) < 0)
			return;
		t++;
	}
}

// rotate is criLog.rotateLocked.
static void rotate(void) {
	if (trim_rotated(max_files - 2) < 0) {
		rotation_failed(errno);
		return;
	}
	char stamp[STAMP_MAX], to[PATH_MAX];
	next_stamp(stamp);
	if (rotated_path(to, sizeof to, stamp, "") < 0 || renameat(dir_fd, log_name, dir_fd, to) < 0) {
		rotation_failed(errno);
		return;
	}
	int fd = open_live();
	if (fd < 0) {
		int err = errno;
		if (renameat(dir_fd, to, dir_fd, log_name) < 0)
			add_rotated(stamp, 0); // writes go on to the old file, now named as rotated
		rotation_failed(err);
		return;
	}
	close(log_fd);
	log_fd = fd;
	size = 0;
	rotate_at = max_size;
	add_rotated(stamp, 0);
	if (rotate_failed) {
		rotate_failed = 0;
		say("INFO", "rotating container log again", "path=%s", log_path);
	}
	gz_due = 1;
	if (!gz_pid)
		gzip_start_pass();
}

// add_entry buffers one entry stamped head, rotating first when it would take
// the live file past rotate_at (criLog.write).
static void add_entry(const char *head, size_t hlen, const char *content, size_t n, int partial) {
	size_t esize = hlen + 3 + n + 1;
	if (max_size > 0 && size + (long long)wlen > 0 && size + (long long)(wlen + esize) > rotate_at) {
		write_buffered();
		rotate();
	}
	if (wlen + esize > wcap) {
		wcap = wlen + esize > 2 * wcap ? wlen + esize : 2 * wcap;
		wbuf = grow(wbuf, wcap);
	}
	memcpy(wbuf + wlen, head, hlen);
	wlen += hlen;
	memcpy(wbuf + wlen, partial ? " P " : " F ", 3);
	wlen += 3;
	memcpy(wbuf + wlen, content, n);
	wlen += n;
	wbuf[wlen++] = '\n';
	wentries++;
	if (wlen >= FLUSH_AT)
		write_buffered();
}

// add_line adds a line, or a part of one, split into entries of at most
// MAX_LOG_LINE bytes (entries.add).
static void add_line(const char *head, size_t hlen, const char *line, size_t n, int partial) {
	for (;;) {
		size_t k = n < MAX_LOG_LINE ? n : MAX_LOG_LINE;
		n -= k;
		add_entry(head, hlen, line, k, n ? 1 : partial);
		line += k;
		if (!n)
			return;
	}
}

// copy_read reads s once and writes its whole lines (criLog.copy's loop
// body). It returns 0 at EOF or on a read error, 1 when more may come, -1
// when nothing was there.
static int copy_read(struct stream *s) {
	ssize_t n = read(s->fd, s->buf + s->held, COPY_BUFFER - s->held);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return -1;
	int end = n <= 0;
	if (n < 0 && !read_errno)
		read_errno = errno;
	if (n < 0)
		say("ERROR", "monitor failed", "err=\"read %s: %s\"", s->name, strerror(errno));
	if (n < 0)
		n = 0;
	char head[64];
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	size_t hlen = format_time(head, &now);
	hlen += (size_t)snprintf(head + hlen, sizeof head - hlen, " %s", s->name);
	char *data = s->buf;
	size_t len = s->held + (size_t)n;
	for (;;) {
		char *nl = memchr(data, '\n', len);
		if (!nl)
			break;
		add_line(head, hlen, data, (size_t)(nl - data), 0);
		len -= (size_t)(nl - data) + 1;
		data = nl + 1;
	}
	while (len >= MAX_LOG_LINE) {
		add_entry(head, hlen, data, MAX_LOG_LINE, 1);
		data += MAX_LOG_LINE;
		len -= MAX_LOG_LINE;
	}
	if (end && len > 0) {
		add_entry(head, hlen, data, len, 1); // the end of the stream ends it
		len = 0;
	}
	write_buffered();
	memmove(s->buf, data, len);
	s->held = len;
	return end ? 0 : 1;
}

// flush_held writes the start of a line still waiting for its end as a
// partial entry: the Go monitor that takes over reads on from there.
static void flush_held(struct stream *s) {
	if (s->held == 0)
		return;
	char head[64];
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	size_t hlen = format_time(head, &now);
	hlen += (size_t)snprintf(head + hlen, sizeof head - hlen, " %s", s->name);
	add_entry(head, hlen, s->buf, s->held, 1);
	write_buffered();
	s->held = 0;
}

static int cmp_rotated(const void *a, const void *b) {
	return strcmp(((const struct rotated *)a)->stamp, ((const struct rotated *)b)->stamp);
}

static int cmp_name(const void *a, const void *b) {
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_suffix(const char *s, const char *suf) {
	size_t n = strlen(s), k = strlen(suf);
	return n >= k && strcmp(s + n - k, suf) == 0;
}

// scan_rotated lists the log's rotated files as podspec.RotatedLogs does and
// removes what a crash left (a .tmp, a file whose .gz exists).
static int scan_rotated(void) {
	const char *base = log_name;
	size_t blen = strlen(base);
	// A description of its own, read from the start.
	int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	char **names = NULL;
	int nnames = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, base, blen) != 0 || e->d_name[blen] != '.')
			continue;
		if (nnames == cap) {
			cap = cap ? 2 * cap : 16;
			names = grow(names, (size_t)cap * sizeof *names);
		}
		names[nnames] = strdup(e->d_name);
		if (!names[nnames])
			die("allocate");
		nnames++;
	}
	closedir(d);
	// Sorted once, so that a .gz twin is found by bisection: a container
	// that plants many names in its log directory must not make this (and
	// with it the start, or the recording of the exit) quadratic.
	if (nnames > 1)
		qsort(names, (size_t)nnames, sizeof *names, cmp_name);
	nrot = 0;
	for (int i = 0; i < nnames; i++) {
		char *name = names[i], gz[PATH_MAX];
		if ((size_t)snprintf(gz, sizeof gz, "%s.gz", name) >= sizeof gz)
			continue; // not a name rotation could have made

		const char *key = gz;
		int gz_exists = bsearch(&key, names, (size_t)nnames, sizeof *names, cmp_name) != NULL;
		const char *stamp = name + blen + 1;
		if (has_suffix(name, ".tmp") || gz_exists) {
			unlinkat(dir_fd, name, 0);
		} else if (has_suffix(name, ".gz")) {
			char s[STAMP_MAX];
			snprintf(s, sizeof s, "%.*s", (int)(strlen(stamp) - 3), stamp);
			add_rotated(s, 1);
		} else {
			add_rotated(stamp, 0);
		}
	}
	for (int i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	qsort(rot, (size_t)nrot, sizeof *rot, cmp_rotated);
	return 0;
}

// set_rotation is criLog.setRotationLocked.
static int set_rotation(long long msize, int mfiles) {
	if (msize <= 0) {
		max_size = msize;
		max_files = 0;
		return 0;
	}
	if (mfiles < 2)
		mfiles = 2;
	int was_on = max_size > 0;
	max_size = msize;
	max_files = mfiles;
	rotate_at = msize;
	if (was_on) {
		return trim_rotated(max_files - 1);
	}
	if (scan_rotated() < 0)
		return -1;
	gz_due = 1;
	if (!gz_pid)
		gzip_start_pass();
	return 0;
}

// reload_rotation applies the rotation file (monitorProc.reloadRotation):
// the daemon writes it and signals SIGHUP when a reload changed the log's
// limits. Its fixed form (monitor.EncodeRotation): exactly ROTATION_SIZE
// bytes, maxSize then maxFiles, each a little-endian int64; anything else
// changes nothing.
static void reload_rotation(int quiet) {
	if (!rotation_file[0])
		return;
	int fd = open(rotation_file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			say("WARN", "log rotation not changed", "err=\"read %s: %s\"", rotation_file, strerror(errno));
		return;
	}
	// One byte more than the form: a longer file reads longer.
	unsigned char b[ROTATION_SIZE + 1];
	ssize_t n = read(fd, b, sizeof b);
	close(fd);
	if (n != ROTATION_SIZE) {
		say("WARN", "log rotation not changed", "err=\"decode %s\"", rotation_file);
		return;
	}
	uint64_t v[2] = {0, 0};
	for (int i = 0; i < 2; i++)
		for (int k = 7; k >= 0; k--)
			v[i] = v[i] << 8 | b[i * 8 + k];
	long long ms = (long long)v[0], mf = (long long)v[1];
	if (mf > MAX_ROTATION_FILES || mf < -MAX_ROTATION_FILES) {
		say("WARN", "log rotation not changed", "err=\"decode %s\"", rotation_file);
		return;
	}
	if (set_rotation(ms, (int)mf) < 0) {
		say("WARN", "log rotation not changed", "err=\"%s\"", strerror(errno));
		return;
	}
	if (!quiet)
		say("INFO", "log rotation changed", "maxSize=%lld maxFiles=%lld", ms, mf);
}

static void gzip_spawn(int i) {
	char src[PATH_MAX], tmp[PATH_MAX];
	if (rotated_path(src, sizeof src, rot[i].stamp, "") < 0 || rotated_path(tmp, sizeof tmp, rot[i].stamp, ".tmp") < 0) {
		say("WARN", "cannot compress rotated container log", "path=%s err=\"%s\"", log_path, strerror(errno));
		return;
	}
	char ms[24];
	snprintf(ms, sizeof ms, "%lld", max_size);
	char *argv[] = {(char *)prog_name, (char *)gzip_arg, (char *)dir_fd_arg, src, tmp, ms, NULL};
	// Every signal blocked across the fork: called from a Go program
	// (staticpodd_drain_log), the child must not run the Go runtime's
	// handlers before its exec.
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = fork();
	if (pid == 0) {
		// It goes with the monitor, and a SIGHUP meant for the monitor
		// (a process group's) is not its end.
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		// The helper works in the log's directory, by number; the Go
		// monitor opened it close-on-exec.
		fcntl(dir_fd, F_SETFD, 0);
		// Handlers (the Go runtime's) back to the default; an ignored
		// signal stays ignored through the exec, as it did.
		struct sigaction dfl, cur;
		memset(&dfl, 0, sizeof dfl);
		dfl.sa_handler = SIG_DFL;
		for (int sig = 1; sig < NSIG; sig++)
			if (sigaction(sig, NULL, &cur) == 0 && cur.sa_handler != SIG_IGN && cur.sa_handler != SIG_DFL)
				sigaction(sig, &dfl, NULL);
		signal(SIGHUP, SIG_IGN);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	int err = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		say("WARN", "cannot compress rotated container log", "path=%s err=\"fork: %s\"", log_path, strerror(err));
		return;
	}
	gz_pid = pid;
	gz_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	snprintf(gz_stamp, sizeof gz_stamp, "%s", rot[i].stamp);
}

// gzip_next starts the helper on the next rotated file to compress, if any:
// every one but the newest (which readers may still be on), as the kubelet does.
static void gzip_next(void) {
	for (int i = 0; i < nrot - 1; i++) {
		if (!rot[i].gz) {
			gzip_spawn(i);
			return;
		}
	}
}

static void gzip_start_pass(void) {
	gz_due = 0;
	gzip_next();
}

// gzip_done finishes the helper's work as criLog.compressOne does: the .gz
// replaces the file unless rotation removed that meanwhile.
static void gzip_done(int status) {
	char src[PATH_MAX], tmp[PATH_MAX], gz[PATH_MAX];
	// Fit at the spawn; the stamp has not changed.
	rotated_path(src, sizeof src, gz_stamp, "");
	rotated_path(tmp, sizeof tmp, gz_stamp, ".tmp");
	rotated_path(gz, sizeof gz, gz_stamp, ".gz");
	gz_pid = 0;
	if (gz_pidfd >= 0) {
		close(gz_pidfd);
		gz_pidfd = -1;
	}
	int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	int i = find_rotated(gz_stamp);
	if (WIFEXITED(status) && WEXITSTATUS(status) == GZIP_GONE) {
		// Removed behind the monitor's back: nothing to compress, as
		// compressOne has it; the name goes from the list.
		if (i >= 0) {
			memmove(rot + i, rot + i + 1, (size_t)(nrot - i - 1) * sizeof *rot);
			nrot--;
		}
		ok = 1;
	} else if (ok && i < 0) {
		unlinkat(dir_fd, tmp, 0); // removed meanwhile: the .gz must not bring it back
	} else if (ok && renameat(dir_fd, tmp, dir_fd, gz) < 0) {
		unlinkat(dir_fd, tmp, 0);
		ok = 0;
	} else if (ok) {
		rot[i].gz = 1;
		if (remove_if_exists(src) < 0)
			ok = 0;
	} else {
		unlinkat(dir_fd, tmp, 0);
	}
	if (!ok && !gz_failing) {
		gz_failing = 1;
		say("WARN", "cannot compress rotated container log", "path=%s err=\"compress %s: %s %d (the helper's line says why)\"",
		    log_path, src, WIFEXITED(status) ? "helper exited with code" : "helper killed by signal",
		    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	} else if (ok && gz_failing) {
		gz_failing = 0;
		say("INFO", "compressing rotated container logs again", "path=%s", log_path);
	}
	if (ok)
		gzip_next();
	if (!gz_pid && gz_due)
		gzip_start_pass();
}

// gzip_stop ends the helper as criLog.Close ends its compressor: the file it
// was compressing stays as it is, and its .tmp goes.
static void gzip_stop(void) {
	if (!gz_pid)
		return;
	char tmp[PATH_MAX];
	kill(gz_pid, SIGKILL);
	waitpid(gz_pid, NULL, 0);
	rotated_path(tmp, sizeof tmp, gz_stamp, ".tmp");
	unlinkat(dir_fd, tmp, 0);
	gz_pid = 0;
	if (gz_pidfd >= 0) {
		close(gz_pidfd);
		gz_pidfd = -1;
	}
}

static void reap(void) {
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == init_pid) {
			init_exited = 1;
			init_status = status;
			clock_gettime(CLOCK_REALTIME, &finished);
		} else if (pid == gz_pid) {
			gzip_done(status);
		}
		// else: an orphan of the container, reparented to the subreaper.
	}
}

static long long parse_ll(const char *s, const char *what) {
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (!*s || *end || errno) {
		errno = EINVAL;
		die(what);
	}
	return v;
}

static void run(int argc, char **argv) {
	if (argc < 13) {
		dprintf(2, "monitor: want %s <id> <log> <log-dir-fd> <maxSize> <maxFiles> <rotation-file> <init-pid> <stdout-fd> <stderr-fd> <gzip-arg> <finish-argv...>\n",
			RUNNING_ARG);
		_exit(2);
	}
	ctr_id = argv[2];
	log_path = argv[3];
	const char *slash = strrchr(log_path, '/');
	log_name = slash ? slash + 1 : log_path;
	dir_fd_arg = argv[4];
	dir_fd = (int)parse_ll(argv[4], "log dir fd");
	long long msize = parse_ll(argv[5], "maxSize");
	int mfiles = (int)parse_ll(argv[6], "maxFiles");
	rotation_file = argv[7];
	init_pid = (pid_t)parse_ll(argv[8], "init pid");
	int out_fd = (int)parse_ll(argv[9], "stdout fd");
	int err_fd = (int)parse_ll(argv[10], "stderr fd");
	gzip_arg = argv[11];
	finish_argv = argv + 12;
	prog_name = finish_argv[0];
	finish_argc = argc - 12;

	// Exec'd from /proc/self/exe, the kernel named it "exe": ps, top and the
	// journal show the monitor's own name (argv[0], cut to 15 bytes).
	prctl(PR_SET_NAME, argv[0], 0, 0, 0);
	// The Go monitor was a child subreaper already; an exec keeps that.
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		die("become subreaper");
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		die("block signals");
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		die("signalfd");
	struct stream streams[2] = {{out_fd, "stdout", NULL, 0}, {err_fd, "stderr", NULL, 0}};
	for (int i = 0; i < 2; i++) {
		int fl = fcntl(streams[i].fd, F_GETFL);
		if (fl < 0 || fcntl(streams[i].fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
		    fcntl(streams[i].fd, F_SETFD, FD_CLOEXEC) < 0)
			die("set up pipe");
		streams[i].buf = grow(NULL, COPY_BUFFER);
	}
	struct stat dst;
	if (fstat(dir_fd, &dst) < 0)
		die("open log dir");
	if (!S_ISDIR(dst.st_mode) || !*log_name) {
		errno = ENOTDIR;
		die("open log dir");
	}
	log_fd = open_live();
	if (log_fd < 0)
		die("open log");
	struct stat st;
	if (fstat(log_fd, &st) == 0 && S_ISREG(st.st_mode))
		size = st.st_size;
	if (set_rotation(msize, mfiles) < 0)
		say("WARN", "cannot list rotated container logs", "path=%s err=\"%s\"", log_path, strerror(errno));
	// A SIGHUP the Go monitor took before its exec is not lost: the file it
	// announced is read now.
	reload_rotation(1);
	// Init must be a child to be waited for; one that is not (reaped by
	// someone else, never ours) is recorded as lost rather than waited for
	// in vain.
	siginfo_t si;
	memset(&si, 0, sizeof si);
	if (waitid(P_PID, (id_t)init_pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD) {
		say("ERROR", "container init is not a child of the monitor", "pid=%d", (int)init_pid);
		init_exited = 1;
		init_status = 255 << 8;
		clock_gettime(CLOCK_REALTIME, &finished);
	}
	reap();

	while (!init_exited) {
		struct pollfd p[3] = {{sfd, POLLIN, 0}};
		int np = 1;
		for (int i = 0; i < 2; i++)
			if (streams[i].fd >= 0)
				p[np++] = (struct pollfd){streams[i].fd, POLLIN, 0};
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (p[0].revents) {
			struct signalfd_siginfo si;
			int hup = 0, chld = 0;
			while (read(sfd, &si, sizeof si) == sizeof si) {
				hup |= si.ssi_signo == SIGHUP;
				chld |= si.ssi_signo == SIGCHLD;
			}
			if (hup)
				reload_rotation(0);
			if (chld)
				reap();
		}
		for (int k = 1; k < np; k++) {
			if (!p[k].revents)
				continue;
			struct stream *s = p[k].fd == out_fd ? &streams[0] : &streams[1];
			if (copy_read(s) == 0) {
				s->fd = -1; // EOF: the container closed it; init may run on
			}
		}
	}
	// What the pipes hold now is written here, up to a bound (leftovers of a
	// container without a PID namespace of its own may write on and on);
	// what they write later, the Go monitor reads after it killed them.
	for (int i = 0; i < 2; i++) {
		for (int reads = 0; streams[i].fd >= 0 && reads < DRAIN_READS; reads++) {
			int r = copy_read(&streams[i]);
			if (r == 0)
				streams[i].fd = -1;
			if (r != 1)
				break;
		}
		flush_held(&streams[i]);
	}
	gzip_stop();
	close(log_fd);
	// The pipes go on to the Go monitor; a closed one reads EOF there at once.
	if (fcntl(out_fd, F_SETFD, 0) < 0 || fcntl(err_fd, F_SETFD, 0) < 0)
		die("pass on the pipes");
	char **av = grow(NULL, (size_t)(finish_argc + 5) * sizeof *av);
	char status[16], when[32], ms[32], mf[16];
	snprintf(status, sizeof status, "%d", init_status);
	snprintf(when, sizeof when, "%lld", (long long)finished.tv_sec * 1000000000LL + finished.tv_nsec);
	snprintf(ms, sizeof ms, "%lld", max_size);
	snprintf(mf, sizeof mf, "%d", max_files);
	memcpy(av, finish_argv, (size_t)finish_argc * sizeof *av);
	av[finish_argc] = status;
	av[finish_argc + 1] = when;
	av[finish_argc + 2] = ms;
	av[finish_argc + 3] = mf;
	av[finish_argc + 4] = NULL;
	// The exit recorder is Go, which makes SIGHUP fatal unless it finds it
	// ignored; a reload's SIGHUP must not cost the exit. Ignoring drops one
	// pending, too.
	signal(SIGHUP, SIG_IGN);
	execv("/proc/self/exe", av);
	die("exec the exit recorder");
}

// staticpodd_drain_log copies the pipes out_fd and err_fd into the log, the
// file name in the directory dirfd (path names it in messages), until both
// are at their end, rotating it at max_size with max_files as the C monitor
// does and compressing the rotated files with the gzip helper (prog_arg0
// gzip_arg, /proc/self/exe). It is the C monitor's writer where no C monitor
// runs: called once per process from the Go monitor (drain_linux.go), after
// a start that failed and in the exit recorder, which reap no child of their
// own meanwhile (the helper is waited for by its pid). It returns 0; minus
// an errno when the log could not be opened (nothing was read); or an errno
// when a pipe could not be read (what was read is written). The pipes and
// dirfd stay open.
int staticpodd_drain_log(const char *id, const char *path, int dirfd, long long msize, int mfiles,
			 int out_fd, int err_fd, const char *prog_arg0, const char *gz_arg) {
	static char dirfd_str[16];
	snprintf(dirfd_str, sizeof dirfd_str, "%d", dirfd);
	ctr_id = id;
	log_path = path;
	const char *slash = strrchr(log_path, '/');
	log_name = slash ? slash + 1 : log_path;
	dir_fd = dirfd;
	dir_fd_arg = dirfd_str;
	rotation_file = "";
	prog_name = prog_arg0;
	gzip_arg = gz_arg;
	struct stat dst;
	if (fstat(dir_fd, &dst) < 0)
		return -errno;
	if (!S_ISDIR(dst.st_mode) || !*log_name)
		return -ENOTDIR;
	log_fd = open_live();
	if (log_fd < 0)
		return -errno;
	struct stat st;
	if (fstat(log_fd, &st) == 0 && S_ISREG(st.st_mode))
		size = st.st_size;
	if (set_rotation(msize, mfiles) < 0)
		say("WARN", "cannot list rotated container logs", "path=%s err=\"%s\"", log_path, strerror(errno));
	struct stream streams[2] = {{out_fd, "stdout", NULL, 0}, {err_fd, "stderr", NULL, 0}};
	int rerr = 0;
	for (int i = 0; i < 2; i++) {
		int fl = fcntl(streams[i].fd, F_GETFL);
		if (fl < 0 || fcntl(streams[i].fd, F_SETFL, fl | O_NONBLOCK) < 0) {
			rerr = errno;
			streams[i].fd = -1;
		}
		streams[i].buf = grow(NULL, COPY_BUFFER);
	}
	while (streams[0].fd >= 0 || streams[1].fd >= 0) {
		struct pollfd p[3];
		int np = 0;
		for (int i = 0; i < 2; i++)
			if (streams[i].fd >= 0)
				p[np++] = (struct pollfd){streams[i].fd, POLLIN, 0};
		int gz = gz_pidfd >= 0 ? np : -1;
		if (gz >= 0)
			p[np++] = (struct pollfd){gz_pidfd, POLLIN, 0};
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			rerr = errno;
			break;
		}
		if (gz >= 0 && p[gz].revents) {
			int status;
			if (waitpid(gz_pid, &status, WNOHANG) == gz_pid)
				gzip_done(status);
		}
		for (int k = 0; k < np; k++) {
			if (k == gz || !p[k].revents)
				continue;
			struct stream *s = p[k].fd == out_fd ? &streams[0] : &streams[1];
			if (copy_read(s) == 0)
				s->fd = -1;
		}
	}
	gzip_stop();
	close(log_fd);
	log_fd = -1;
	free(streams[0].buf);
	free(streams[1].buf);
	return rerr ? rerr : read_errno;
}

// A constructor runs before the Go runtime starts, as libcontainer's nsexec
// does: in this role the process never becomes a Go program at all.
__attribute__((constructor)) static void staticpodd_monitor_running(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc >= 2 && strcmp(argv[1], RUNNING_ARG) == 0)
		run(argc, argv);
}
