//go:build linux

// The quick `staticpodd exec`: the CLI's exec in C, before the Go runtime
// starts. See execfast_linux.go for when it serves and when it leaves the
// exec to Go; exec.go is the one full implementation, which this mirrors
// message for message on the way it takes (tests/execfast_test.go holds the
// two to the same output).

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

// The Go side's names, checked against them by TestQuickExecNames.
#define ENV_RUN_DIR "STATICPODD_RUN_DIR" // config.EnvRunDir
#define DEFAULT_RUN_DIR "/run/staticpodd" // config.DefaultRunDir
#define SOCKET_NAME "staticpodd.sock"     // daemon.SocketName
#define KUBELET_NAME "kubelet"            // config.KubeletName
#define EXEC_PROTOCOL "staticpodd-exec.v1" // server.ExecProtocol
#define NOTE_HEADER "Staticpodd-Note"     // server.NoteHeader
#define ANSWER_TIMEOUT_S 10               // execAnswerTimeout
#define ANSWER_TIMEOUT_TEXT "10s"
#define MAX_FRAME (32 << 10)              // server.maxFrame
#define STREAM_STDOUT 1
#define STREAM_STDERR 2
#define STREAM_STATUS 3

const char *staticpodd_quick_exec_names[] = {ENV_RUN_DIR, DEFAULT_RUN_DIR, SOCKET_NAME, KUBELET_NAME,
					     EXEC_PROTOCOL, NOTE_HEADER, ANSWER_TIMEOUT_TEXT};
const int staticpodd_quick_exec_max_frame = MAX_FRAME;

// The connection, nonblocking. Until the daemon's 101 the interrupting
// signals are blocked but in the waits (ppoll), so that none is lost between
// a check and a wait, and one that comes as the exec is left to Go is still
// pending; from the 101 on they are not blocked, and their handler shuts the
// connection down at once, as exec.go's AfterFunc closes it: the daemon
// kills the command even while this process waits to write its output.
static int conn = -1;
static volatile sig_atomic_t interrupted;
static void on_signal(int sig) {
	int saved = errno;
	(void)sig;
	interrupted = 1;
	if (conn >= 0)
		shutdown(conn, SHUT_RDWR);
	errno = saved;
}

static void on_nothing(int sig) { (void)sig; }

// go_takes_no_action says the Go runtime catches sig and, with no
// signal.Notify for it, does nothing (runtime/sigtab_linux_generic.go:
// _SigNotify alone; SIGPROF while not profiling; the real-time signals from
// 35). 32 and 34 it leaves to their defaults, as here; 33 a Go program
// survives (the C library's handler, installed with Go's first thread),
// where the quick exec cannot have one (the C library keeps it) and ends.
#define NOP_SIGNALS NSIG
static int go_takes_no_action(int sig) {
	switch (sig) {
	case SIGUSR1: case SIGUSR2: case SIGALRM: case SIGXCPU: case SIGXFSZ: case SIGVTALRM: case SIGIO: case SIGPWR:
	case SIGPROF:
	case SIGPIPE: // one sent by kill; an EPIPE on stdout or stderr still ends the exec (die_of_sigpipe)
		return 1;
	}
	return sig >= 35 && sig <= SIGRTMAX;
}

#define INTERRUPTED_BEFORE "interrupted before the daemon answered"
#define INTERRUPTED_AFTER "interrupted; the command was killed"
static void fail(const char *msg, int code) __attribute__((noreturn));

// A growing byte string; an allocation failure ends the process as Go's
// would.
struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *p, size_t n) {
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (b->len + n + 1 > cap)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q)
			abort();
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = 0;
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

// die_of_sigpipe ends the process as the Go runtime does after a write
// to stdout or stderr failed with EPIPE (os.sigpipe): by SIGPIPE, whatever
// its disposition was (a service's IgnoreSIGPIPE=, a shell's trap '' PIPE).
static void die_of_sigpipe(void) __attribute__((noreturn));
static void die_of_sigpipe(void) {
	sigset_t set;
	signal(SIGPIPE, SIG_DFL);
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	raise(SIGPIPE);
	_exit(2);
}

// write_all writes p to fd whatever it takes (an output that is not
// drained waits), and drops it on another error, as exec.go's writes do.
// The command's output (output set) ends at an interrupt; a message does
// not.
static void write_all(int fd, const char *p, size_t n, int output) {
	while (n > 0) {
		if (output && interrupted)
			fail(INTERRUPTED_AFTER, 130);
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			poll(&pfd, 1, -1);
			continue;
		}
		if (w < 0 && errno == EPIPE && (fd == 1 || fd == 2))
			die_of_sigpipe();
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

// decode_rune is Go's utf8.DecodeRune: the rune at p and its width, an
// invalid sequence being U+FFFD of width 1.
static uint32_t decode_rune(const unsigned char *p, size_t n, size_t *width) {
	*width = 1;
	if (n == 0)
		return 0xFFFD;
	unsigned char c = p[0];
	if (c < 0x80)
		return c;
	uint32_t r;
	size_t need;
	unsigned char lo = 0x80, hi = 0xBF;
	if (c >= 0xC2 && c <= 0xDF) {
		need = 1;
		r = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		need = 2;
		r = c & 0x0F;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F; // no surrogates
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 3;
		r = c & 0x07;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else {
		return 0xFFFD;
	}
	if (n < need + 1)
		return 0xFFFD;
	for (size_t i = 1; i <= need; i++) {
		unsigned char cc = p[i];
		if (cc < (i == 1 ? lo : 0x80) || cc > (i == 1 ? hi : 0xBF))
			return 0xFFFD;
		r = r << 6 | (cc & 0x3F);
	}
	*width = need + 1;
	return r;
}

static void put_rune(struct buf *b, uint32_t r) {
	char s[4];
	if (r < 0x80) {
		s[0] = (char)r;
		put(b, s, 1);
	} else if (r < 0x800) {
		s[0] = (char)(0xC0 | r >> 6);
		s[1] = (char)(0x80 | (r & 0x3F));
		put(b, s, 2);
	} else if (r < 0x10000) {
		s[0] = (char)(0xE0 | r >> 12);
		s[1] = (char)(0x80 | (r >> 6 & 0x3F));
		s[2] = (char)(0x80 | (r & 0x3F));
		put(b, s, 3);
	} else {
		s[0] = (char)(0xF0 | r >> 18);
		s[1] = (char)(0x80 | (r >> 12 & 0x3F));
		s[2] = (char)(0x80 | (r >> 6 & 0x3F));
		s[3] = (char)(0x80 | (r & 0x3F));
		put(b, s, 4);
	}
}

// is_control is unicode.IsControl: C0, DEL and C1.
static int is_control(uint32_t r) { return r < 0x20 || (r >= 0x7F && r <= 0x9F); }

// escape_but is describe.EscapeBut: each control character not in keep
// written as an escape; a string with none is left as it is, and one with
// some has its invalid UTF-8 written as U+FFFD, as Go's range does.
static void escape_but(struct buf *out, const char *s, size_t n, const char *keep) {
	const unsigned char *u = (const unsigned char *)s;
	int any = 0;
	for (size_t i = 0, w; i < n; i += w) {
		uint32_t r = decode_rune(u + i, n - i, &w);
		if (is_control(r) && !(r < 0x80 && r != 0 && strchr(keep, (int)r))) {
			any = 1;
			break;
		}
	}
	if (!any) {
		put(out, s, n);
		return;
	}
	for (size_t i = 0, w; i < n; i += w) {
		uint32_t r = decode_rune(u + i, n - i, &w);
		char e[8];
		if (!is_control(r) || (r < 0x80 && r != 0 && strchr(keep, (int)r))) {
			put_rune(out, r);
			continue;
		}
		static const char hex[] = "0123456789abcdef";
		if (r < 0x80) {
			memcpy(e, "\\x", 2);
			e[2] = hex[r >> 4];
			e[3] = hex[r & 0xF];
			put(out, e, 4);
		} else {
			memcpy(e, "\\u00", 4);
			e[4] = hex[r >> 4];
			e[5] = hex[r & 0xF];
			put(out, e, 6);
		}
	}
}

// say writes "staticpodd: msg" as main's printError does and exits with code.
static void say_exit(const char *msg, size_t n, int code) __attribute__((noreturn));
static void say_exit(const char *msg, size_t n, int code) {
	if (n > 0) {
		struct buf b = {0};
		puts_(&b, "staticpodd: ");
		escape_but(&b, msg, n, "\n\t");
		puts_(&b, "\n");
		write_all(2, b.p, b.len, 0);
	}
	_exit(code);
}

static void fail(const char *msg, int code) { say_exit(msg, strlen(msg), code); }

// query_escape is url.QueryEscape.
static void query_escape(struct buf *b, const char *s) {
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		    c == '.' || c == '~') {
			put(b, p, 1);
		} else if (c == ' ') {
			puts_(b, "+");
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 0xF]};
			put(b, e, 3);
		}
	}
}

static void query_add(struct buf *b, const char *key, const char *value) {
	if (b->len > 0 && b->p[b->len - 1] != '?')
		puts_(b, "&");
	puts_(b, key);
	puts_(b, "=");
	query_escape(b, value);
}

static sigset_t waitmask; // the caller's mask, less the interrupting signals

// wait_for waits for events on conn until deadline (0: none) and returns
// 1 when they came, 0 at the deadline; it ends the process when interrupted,
// with msg.
static int wait_for(short events, const struct timespec *deadline, const char *interrupted_msg) {
	for (;;) {
		if (interrupted)
			fail(interrupted_msg, 130);
		struct pollfd pfd = {.fd = conn, .events = events};
		struct timespec left, now, *timeout = NULL;
		if (deadline) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			left.tv_sec = deadline->tv_sec - now.tv_sec;
			left.tv_nsec = deadline->tv_nsec - now.tv_nsec;
			if (left.tv_nsec < 0) {
				left.tv_sec--;
				left.tv_nsec += 1000000000L;
			}
			if (left.tv_sec < 0)
				return 0;
			timeout = &left;
		}
		int n = ppoll(&pfd, 1, timeout, &waitmask);
		if (n > 0)
			return 1;
		if (n == 0)
			return 0;
		if (errno != EINTR)
			return 1; // the read or write that follows says what is wrong
	}
}

// The frames' reader: in holds what came after the 101's header.
static char in[MAX_FRAME + 64 * 1024];
static size_t in_off, in_len;

// fill reads more into in, keeping in[in_off:in_len]; 0 at the end of the
// connection, -1 on an error (errno).
static int fill(void) {
	if (in_off > 0) {
		memmove(in, in + in_off, in_len - in_off);
		in_len -= in_off;
		in_off = 0;
	}
	for (;;) {
		if (interrupted) // the handler shut the connection down
			fail(INTERRUPTED_AFTER, 130);
		ssize_t n = read(conn, in + in_len, sizeof in - in_len);
		if (n > 0) {
			in_len += (size_t)n;
			return 1;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (interrupted)
			fail(INTERRUPTED_AFTER, 130);
		if (n == 0)
			return 0;
		if (errno != EAGAIN)
			return -1;
		wait_for(POLLIN, NULL, INTERRUPTED_AFTER);
	}
}

// lost ends the exec as readOutput does when the connection ends before the
// status frame.
#define LOST "connection to the daemon lost before the command's exit status came: "
static void lost(const char *why) __attribute__((noreturn));
static void lost(const char *why) {
	struct buf b = {0};
	puts_(&b, LOST);
	puts_(&b, why);
	fail(b.p, 1);
}

static struct sockaddr_un addr = {.sun_family = AF_UNIX};

// read_failed ends the exec after a failed read of the connection, saying
// it after prefix as Go's net.OpError says it (Go's texts of errno values
// are the C library's, lowercased).
static void read_failed(const char *prefix, int err) __attribute__((noreturn));
static void read_failed(const char *prefix, int err) {
	struct buf b = {0};
	puts_(&b, prefix);
	puts_(&b, "read unix @->");
	puts_(&b, addr.sun_path);
	puts_(&b, ": read: ");
	const char *s = strerror(err);
	char c = s[0] >= 'A' && s[0] <= 'Z' ? (char)(s[0] - 'A' + 'a') : s[0];
	put(&b, &c, 1);
	puts_(&b, s + 1);
	fail(b.p, 1);
}

// The status frame's JSON, server.ExecStatus: {"exitCode":N,"error":"..."},
// as encoding/json reads it (keys matched without regard to case, the last
// of a key winning, invalid UTF-8 in a string read as U+FFFD). What it does
// not take (another value than a string, number, true, false or null) is a
// daemon this CLI does not understand: it says so.
struct json {
	const unsigned char *p, *end;
};

static void json_ws(struct json *j) {
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static int hex4(const unsigned char *p, uint32_t *v) {
	*v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned char c = p[i];
		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			*v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			*v |= c - 'A' + 10;
		else
			return 0;
	}
	return 1;
}

static int json_string(struct json *j, struct buf *out) {
	if (j->p >= j->end || *j->p != '"')
		return 0;
	j->p++;
	while (j->p < j->end) {
		unsigned char c = *j->p;
		if (c == '"') {
			j->p++;
			if (!out->p)
				put(out, "", 0);
			return 1;
		}
		if (c < 0x20)
			return 0;
		if (c != '\\') {
			size_t w;
			uint32_t r = decode_rune(j->p, (size_t)(j->end - j->p), &w);
			if (r == 0xFFFD && w == 1)
				put_rune(out, r);
			else
				put(out, j->p, w);
			j->p += w;
			continue;
		}
		if (j->end - j->p < 2)
			return 0;
		c = j->p[1];
		j->p += 2;
		switch (c) {
		case '"': case '\\': case '/': put(out, &c, 1); break;
		case 'b': put(out, "\b", 1); break;
		case 'f': put(out, "\f", 1); break;
		case 'n': put(out, "\n", 1); break;
		case 'r': put(out, "\r", 1); break;
		case 't': put(out, "\t", 1); break;
		case 'u': {
			uint32_t r, r2;
			if (j->end - j->p < 4 || !hex4(j->p, &r))
				return 0;
			j->p += 4;
			if (r >= 0xD800 && r < 0xDC00) {
				if (j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' && hex4(j->p + 2, &r2) &&
				    r2 >= 0xDC00 && r2 < 0xE000) {
					j->p += 6;
					r = 0x10000 + ((r - 0xD800) << 10) + (r2 - 0xDC00);
				} else {
					r = 0xFFFD;
				}
			} else if (r >= 0xDC00 && r < 0xE000) {
				r = 0xFFFD;
			}
			put_rune(out, r);
			break;
		}
		default:
			return 0;
		}
	}
	return 0;
}

static int json_skip_literal(struct json *j) {
	static const char *lits[] = {"true", "false", "null"};
	for (int i = 0; i < 3; i++) {
		size_t n = strlen(lits[i]);
		if ((size_t)(j->end - j->p) >= n && memcmp(j->p, lits[i], n) == 0) {
			j->p += n;
			return 1;
		}
	}
	return 0;
}

// json_number reads a JSON number; *isint says whether it is an integer
// that fits in an int64, *v its value then.
static int json_number(struct json *j, long long *v, int *isint) {
	int neg = 0;
	unsigned long long u = 0;
	*isint = 1;
	if (j->p < j->end && *j->p == '-') {
		neg = 1;
		j->p++;
	}
	if (j->p >= j->end || *j->p < '0' || *j->p > '9')
		return 0;
	if (*j->p == '0') {
		j->p++;
	} else {
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
			unsigned d = *j->p - '0';
			if (u > (ULLONG_MAX - d) / 10)
				*isint = 0;
			else
				u = u * 10 + d;
			j->p++;
		}
	}
	if (j->p < j->end && *j->p == '.') {
		*isint = 0;
		j->p++;
		if (j->p >= j->end || *j->p < '0' || *j->p > '9')
			return 0;
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		*isint = 0;
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (j->p >= j->end || *j->p < '0' || *j->p > '9')
			return 0;
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	if (*isint && (neg ? u > (unsigned long long)LLONG_MAX + 1 : u > (unsigned long long)LLONG_MAX))
		*isint = 0;
	if (*isint)
		*v = neg ? (long long)(0 - u) : (long long)u;
	return 1;
}

static int json_scalar(struct json *j) {
	unsigned char c = *j->p;
	if (c == '"') {
		struct buf s = {0};
		int ok = json_string(j, &s);
		free(s.p);
		return ok;
	}
	if (c == '-' || (c >= '0' && c <= '9')) {
		long long v;
		int isint;
		return json_number(j, &v, &isint);
	}
	return json_skip_literal(j);
}

static int json_key(struct json *j) {
	struct buf key = {0};
	json_ws(j);
	int ok = json_string(j, &key);
	free(key.p);
	json_ws(j);
	return ok && j->p < j->end && *j->p++ == ':';
}

// json_skip skips one value, checking its syntax, without recursion; depth
// is how many objects and arrays are open around it: encoding/json takes
// 10000 at the most.
#define JSON_MAX_DEPTH 10000
static int json_skip(struct json *j, int depth) {
	static unsigned char open[JSON_MAX_DEPTH + 1]; // each open one's closing character
	int top = 0;
	for (;;) {
		json_ws(j);
		if (j->p >= j->end)
			return 0;
		unsigned char c = *j->p;
		if (c == '{' || c == '[') {
			if (depth + top + 1 > JSON_MAX_DEPTH)
				return 0;
			j->p++;
			open[top++] = c == '{' ? '}' : ']';
			json_ws(j);
			if (j->p < j->end && *j->p == open[top - 1]) {
				j->p++;
				top--;
			} else {
				if (c == '{' && !json_key(j))
					return 0;
				continue; // its first value
			}
		} else if (!json_scalar(j)) {
			return 0;
		}
		// After a value: the next of the innermost open one, or its end.
		for (;;) {
			if (top == 0)
				return 1;
			json_ws(j);
			if (j->p < j->end && *j->p == ',') {
				j->p++;
				if (open[top - 1] == '}' && !json_key(j))
					return 0;
				break;
			}
			if (j->p < j->end && *j->p == open[top - 1]) {
				j->p++;
				top--;
				continue;
			}
			return 0;
		}
	}
}

static int key_is(const struct buf *key, const char *name) {
	return key->len == strlen(name) && strncasecmp(key->p, name, key->len) == 0;
}

static int parse_status(const char *p, size_t n, long long *code, struct buf *msg) {
	struct json j = {(const unsigned char *)p, (const unsigned char *)p + n};
	json_ws(&j);
	if (j.end - j.p >= 4 && memcmp(j.p, "null", 4) == 0) { // a zero status, as Unmarshal leaves it
		j.p += 4;
		json_ws(&j);
		return j.p == j.end;
	}
	if (j.p >= j.end || *j.p++ != '{')
		return 0;
	json_ws(&j);
	if (j.p < j.end && *j.p == '}') {
		j.p++;
		goto end;
	}
	for (;;) {
		struct buf key = {0};
		json_ws(&j);
		if (!json_string(&j, &key))
			return 0;
		json_ws(&j);
		if (j.p >= j.end || *j.p++ != ':')
			return 0;
		json_ws(&j);
		if (j.p >= j.end)
			return 0;
		int is_code = key_is(&key, "exitCode"), is_error = key_is(&key, "error");
		free(key.p);
		if (*j.p == '"') {
			struct buf s = {0};
			if (!json_string(&j, &s) || is_code)
				return 0;
			if (is_error) {
				free(msg->p);
				*msg = s;
			} else {
				free(s.p);
			}
		} else if (*j.p == '-' || (*j.p >= '0' && *j.p <= '9')) {
			long long v;
			int isint;
			if (!json_number(&j, &v, &isint) || is_error || (is_code && !isint))
				return 0;
			if (is_code)
				*code = v;
		} else if (*j.p == 'n' && json_skip_literal(&j)) {
			// null leaves a field as it is
		} else if (is_code || is_error || !json_skip(&j, 1)) {
			return 0;
		}
		json_ws(&j);
		if (j.p < j.end && *j.p == ',') {
			j.p++;
			continue;
		}
		if (j.p < j.end && *j.p == '}') {
			j.p++;
			break;
		}
		return 0;
	}
end:
	json_ws(&j);
	return j.p == j.end;
}

// go_quote appends p quoted as strconv.Quote does for ASCII (a byte that
// is not UTF-8 as \xNN, a control as its escape). Every other character it
// writes as an escape too (strconv keeps those unicode.IsPrint allows): the
// line comes from a daemon that sent a malformed header, and a character
// such as U+202E must not reach the terminal as it is.
static void go_quote(struct buf *b, const char *p, size_t n) {
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)p;
	puts_(b, "\"");
	for (size_t i = 0, w; i < n; i += w) {
		uint32_t r = decode_rune(u + i, n - i, &w);
		char e[12] = {'\\'};
		if (r == 0xFFFD && w == 1) {
			e[1] = 'x';
			e[2] = hex[u[i] >> 4];
			e[3] = hex[u[i] & 0xF];
			put(b, e, 4);
		} else if (r == '"' || r == '\\') {
			e[1] = (char)r;
			put(b, e, 2);
		} else if (r >= 0x20 && r < 0x7F) {
			put(b, u + i, w);
		} else if (r >= '\a' && r <= '\r') {
			e[1] = "abtnvfr"[r - '\a'];
			put(b, e, 2);
		} else if (r < 0x80) {
			e[1] = 'x';
			e[2] = hex[r >> 4];
			e[3] = hex[r & 0xF];
			put(b, e, 4);
		} else {
			int digits = r < 0x10000 ? 4 : 8;
			e[1] = digits == 4 ? 'u' : 'U';
			for (int k = 0; k < digits; k++)
				e[2 + k] = hex[(r >> (4 * (digits - 1 - k))) & 0xF];
			put(b, e, (size_t)(2 + digits));
		}
	}
	puts_(b, "\"");
}

// answer_malformed ends the exec over a 101 whose header http.ReadResponse
// would not take, with its message.
static void answer_malformed(const char *what, const char *line, size_t n) __attribute__((noreturn));
static void answer_malformed(const char *what, const char *line, size_t n) {
	struct buf b = {0};
	puts_(&b, "read exec answer: ");
	puts_(&b, what);
	go_quote(&b, line, n);
	fail(b.p, 1);
}

// header_end is the offset just past the empty line that ends the answer's
// header in p, 0 while it has not come. Lines end with \n, a \r before it
// dropped, as textproto reads them.
static size_t header_end(const char *p, size_t n) {
	for (size_t i = 0; i < n;) {
		const char *nl = memchr(p + i, '\n', n - i);
		if (!nl)
			return 0;
		size_t len = (size_t)(nl - (p + i));
		if (len == 0 || (len == 1 && p[i] == '\r'))
			return (size_t)(nl - p) + 1;
		i = (size_t)(nl - p) + 1;
	}
	return 0;
}

static void answer_error(struct buf *b) __attribute__((noreturn));

// status_code is the answer's status code as http.ReadResponse reads its
// first line (p[0:n], up to \n or, at the connection's end, all of it):
// "HTTP/d.d", a space, spaces, a code of three characters, then a space or
// the end. A line it would not take ends the exec with its message.
static int status_code(const char *p, size_t n) {
	const char *nl = memchr(p, '\n', n);
	size_t len = nl ? (size_t)(nl - p) : n;
	if (nl && len > 0 && p[len - 1] == '\r') // bufio's ReadLine drops a \r before a \n only
		len--;
	struct buf m = {0};
	const char *sp = memchr(p, ' ', len), *e = p + len;
	if (!sp) {
		puts_(&m, "malformed HTTP response ");
		go_quote(&m, p, len);
		answer_error(&m);
	}
	const char *c = sp;
	while (c < e && *c == ' ')
		c++;
	const char *ce = memchr(c, ' ', (size_t)(e - c));
	size_t clen = ce ? (size_t)(ce - c) : (size_t)(e - c);
	// strconv.Atoi of three characters, not negative.
	int code = 0, ok = clen == 3, neg = 0;
	for (size_t k = 0; k < clen && ok; k++) {
		if (k == 0 && (c[k] == '+' || c[k] == '-')) {
			neg = c[k] == '-';
			continue;
		}
		ok = c[k] >= '0' && c[k] <= '9';
		code = code * 10 + (c[k] - '0');
	}
	if (!ok || (neg && code != 0)) {
		puts_(&m, "malformed HTTP status code ");
		go_quote(&m, c, clen);
		answer_error(&m);
	}
	// http.ParseHTTPVersion.
	if (sp - p != 8 || memcmp(p, "HTTP/", 5) != 0 || p[5] < '0' || p[5] > '9' || p[6] != '.' || p[7] < '0' || p[7] > '9') {
		puts_(&m, "malformed HTTP version ");
		go_quote(&m, p, (size_t)(sp - p));
		answer_error(&m);
	}
	return code;
}

static int header_field_byte(unsigned char c) {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

// header_line is one line of the header at p[*i:n], without its \n and the
// \r before it; *i moves past it. A last line without \n (all that came
// before the connection's end or the deadline) is a line as it is, as
// bufio's ReadLine returns it.
static const char *header_line(const char *p, size_t n, size_t *i, size_t *len) {
	const char *line = p + *i, *nl = memchr(line, '\n', n - *i);
	if (!nl) {
		*len = n - *i;
		*i = n;
		return line;
	}
	*len = (size_t)(nl - line);
	*i += *len + 1;
	if (*len > 0 && line[*len - 1] == '\r')
		(*len)--;
	return line;
}

// vals are the values of one header key, in order.
struct vals {
	struct buf *v;
	int n;
};

static void trim_sp(const char **p, size_t *n) {
	while (*n > 0 && (**p == ' ' || **p == '\t')) {
		(*p)++;
		(*n)--;
	}
	while (*n > 0 && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t'))
		(*n)--;
}

// read_header checks the header lines of an answer (p[0:n], the status
// line first, up to the empty line that ends the header or to all that
// came) as textproto.ReadMIMEHeader does, continuation lines folded, and
// adds the values of the header key (a header's key as http.Header matches
// it) to vals. A malformed header ends the exec with textproto's message.
static void read_header(const char *p, size_t n, const char *key, struct vals *vals) {
	size_t i = 0, len;
	header_line(p, n, &i, &len); // the status line
	for (int first = 1; i < n; first = 0) {
		const char *line = header_line(p, n, &i, &len);
		if (first && len > 0 && (line[0] == ' ' || line[0] == '\t')) {
			if (len > 80)
				fail("read exec answer: message too large", 1);
			answer_malformed("malformed MIME header initial line: ", line, len);
		}
		if (len == 0)
			return;
		if (!memchr(line, ':', len))
			answer_malformed("malformed MIME header: missing colon: ", line, len);
		// The line and its continuations, each trimmed, joined by a space.
		struct buf kv = {0};
		const char *t = line;
		size_t tl = len;
		trim_sp(&t, &tl);
		put(&kv, t, tl);
		while (i < n && (p[i] == ' ' || p[i] == '\t')) {
			while (i < n && (p[i] == ' ' || p[i] == '\t'))
				i++;
			const char *c = header_line(p, n, &i, &tl);
			trim_sp(&c, &tl);
			puts_(&kv, " ");
			put(&kv, c, tl);
		}
		const char *colon = memchr(kv.p, ':', kv.len);
		size_t klen = (size_t)(colon - kv.p);
		int ok = klen > 0;
		for (size_t k = 0; k < klen && ok; k++)
			ok = header_field_byte((unsigned char)kv.p[k]) || kv.p[k] == ' ';
		for (const char *c = colon + 1; c < kv.p + kv.len && ok; c++)
			ok = !(((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7F);
		if (!ok)
			answer_malformed("malformed MIME header line: ", kv.p, kv.len);
		if (klen == strlen(key) && strncasecmp(kv.p, key, klen) == 0) {
			const char *v = colon + 1;
			while (v < kv.p + kv.len && (*v == ' ' || *v == '\t'))
				v++;
			struct buf *grown = realloc(vals->v, (size_t)(vals->n + 1) * sizeof *grown);
			if (!grown)
				abort();
			vals->v = grown;
			vals->v[vals->n] = (struct buf){0};
			put(&vals->v[vals->n++], v, (size_t)(kv.p + kv.len - v));
		}
		free(kv.p);
	}
}

// The exec's arguments as the quick path takes them; anything else is Go's.
struct args {
	const char *run_dir, *pod, *container, *namespace;
	char **command;
};

// parse_args takes `exec` and what follows it: the persistent flags
// --root-dir and --run-dir, -c/--container and -n/--namespace, each with its
// value as the next argument or after '=', one POD, then -- and the
// command. Any other flag (-i, -t, -h, a short flag with its value
// attached, a value that looks like a flag) and any other shape is left to
// cobra.
static int parse_args(int argc, char **argv, struct args *a) {
	static const struct {
		const char *name;
		int slot; // 0 root dir (unused here), 1 run dir, 2 container, 3 namespace
	} flags[] = {{"--root-dir", 0}, {"--run-dir", 1}, {"-c", 2}, {"--container", 2}, {"-n", 3}, {"--namespace", 3}};
	const char *vals[4] = {0};
	memset(a, 0, sizeof *a);
	for (int i = 2; i < argc; i++) {
		char *s = argv[i];
		if (strcmp(s, "--") == 0) {
			if (!a->pod || i + 1 >= argc)
				return 0;
			a->command = argv + i + 1;
			break;
		}
		if (s[0] != '-') {
			if (a->pod)
				return 0; // a second POD: cobra's usage error
			a->pod = s;
			continue;
		}
		int matched = 0;
		for (size_t f = 0; f < sizeof flags / sizeof flags[0] && !matched; f++) {
			size_t n = strlen(flags[f].name);
			if (strncmp(s, flags[f].name, n) != 0)
				continue;
			if (s[n] == 0) {
				if (i + 1 >= argc || argv[i + 1][0] == '-')
					return 0;
				vals[flags[f].slot] = argv[++i];
				matched = 1;
			} else if (s[n] == '=' && s[1] == '-') { // --flag=value; -c=value is pflag's own case
				vals[flags[f].slot] = s + n + 1;
				matched = 1;
			}
		}
		if (!matched)
			return 0;
	}
	if (!a->command)
		return 0;
	a->run_dir = vals[1];
	a->container = vals[2];
	a->namespace = vals[3];
	return 1;
}

// run_dir_ok: a run dir the quick path joins with the socket's name as
// filepath.Join would, that is one Join's cleaning would not change but for
// slashes: absolute, no "." or ".." component.
static int run_dir_ok(const char *d) {
	if (d[0] != '/')
		return 0;
	for (const char *p = d; *p;) {
		while (*p == '/')
			p++;
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		p = e;
	}
	return 1;
}

// unicode_space is unicode.IsSpace for the rune r.
static int unicode_space(uint32_t r) {
	return (r >= '\t' && r <= '\r') || r == ' ' || r == 0x85 || r == 0xA0 || r == 0x1680 || (r >= 0x2000 && r <= 0x200A) ||
	       r == 0x2028 || r == 0x2029 || r == 0x202F || r == 0x205F || r == 0x3000;
}

// trim_space is strings.TrimSpace.
static void trim_space(const char **p, size_t *n) {
	const unsigned char *u = (const unsigned char *)*p;
	size_t w, start = 0, end = *n;
	while (start < end && unicode_space(decode_rune(u + start, end - start, &w)))
		start += w;
	while (end > start) {
		size_t k = end - 1; // the last rune's start
		while (k > start && end - k < 4 && (u[k] & 0xC0) == 0x80)
			k--;
		uint32_t r = decode_rune(u + k, end - k, &w);
		if (k + w != end) { // not one rune: its last byte is one of its own
			k = end - 1;
			r = decode_rune(u + k, 1, &w);
		}
		if (!unicode_space(r))
			break;
		end = k;
	}
	*p += start;
	*n = end - start;
}

// quote_list appends vals as fmt's %q writes a []string.
static void quote_list(struct buf *b, const struct vals *vals) {
	puts_(b, "[");
	for (int k = 0; k < vals->n; k++) {
		if (k > 0)
			puts_(b, " ");
		go_quote(b, vals->v[k].p, vals->v[k].len);
	}
	puts_(b, "]");
}

static void answer_error(struct buf *b) {
	struct buf m = {0};
	puts_(&m, "read exec answer: ");
	put(&m, b->p, b->len);
	fail(m.p, 1);
}

static int equal_fold(const char *p, size_t n, const char *name) {
	return n == strlen(name) && strncasecmp(p, name, n) == 0;
}

#define BODY_CHUNKED (-1)
#define BODY_TO_THE_END (-2)

// body_length checks an answer's Transfer-Encoding, Content-Length and
// Trailer as http.ReadResponse does (readTransfer: parseTransferEncoding,
// fixLength, fixTrailer), ending the exec with its message where it would
// fail, and returns the body's length, BODY_CHUNKED or BODY_TO_THE_END.
static long long body_length(int code, size_t hdr) {
	struct vals te = {0}, cl = {0}, tr = {0};
	struct buf m = {0};
	int chunked = 0;
	read_header(in, hdr, "Transfer-Encoding", &te);
	read_header(in, hdr, "Content-Length", &cl);
	read_header(in, hdr, "Trailer", &tr);
	// status_code checked "HTTP/d.d"; HTTP/0.0 is taken as 1.1.
	int http11 = (in[5] == '0' && in[7] == '0') || in[5] > '1' || (in[5] == '1' && in[7] >= '1');
	if (te.n > 0 && http11) {
		if (te.n != 1) {
			puts_(&m, "too many transfer encodings: ");
			quote_list(&m, &te);
			answer_error(&m);
		}
		if (!equal_fold(te.v[0].p, te.v[0].len, "chunked")) {
			puts_(&m, "unsupported transfer encoding: ");
			go_quote(&m, te.v[0].p, te.v[0].len);
			answer_error(&m);
		}
		chunked = 1;
	}
	for (int k = 1; k < cl.n; k++) {
		if (cl.v[k].len != cl.v[0].len || memcmp(cl.v[k].p, cl.v[0].p, cl.v[0].len) != 0) {
			puts_(&m, "http: message cannot contain multiple Content-Length headers; got ");
			quote_list(&m, &cl);
			answer_error(&m);
		}
	}
	unsigned long long length = 0;
	if (cl.n > 0) {
		// strconv.ParseUint(cl, 10, 63) of the value (trimmed already).
		const struct buf *v = &cl.v[0];
		int ok = v->len > 0;
		for (size_t k = 0; k < v->len && ok; k++) {
			unsigned d = (unsigned)(v->p[k] - '0');
			ok = d <= 9 && length <= (((unsigned long long)LLONG_MAX) - d) / 10;
			length = length * 10 + d;
		}
		if (!ok) {
			puts_(&m, v->len == 0 ? "invalid empty Content-Length " : "bad Content-Length ");
			go_quote(&m, v->p, v->len);
			answer_error(&m);
		}
	}
	// fixTrailer: a chunked answer's Trailer names no framing header.
	for (int k = 0; chunked && k < tr.n; k++) {
		const char *e = tr.v[k].p, *end = tr.v[k].p + tr.v[k].len;
		while (e < end) {
			const char *c = memchr(e, ',', (size_t)(end - e));
			const char *f = e, *fe = c ? c : end;
			size_t fl = (size_t)(fe - f);
			trim_sp(&f, &fl);
			static const char *bad[] = {"Transfer-Encoding", "Trailer", "Content-Length"};
			for (int b = 0; b < 3; b++) {
				if (equal_fold(f, fl, bad[b])) {
					puts_(&m, "bad trailer key ");
					go_quote(&m, bad[b], strlen(bad[b]));
					answer_error(&m);
				}
			}
			e = c ? c + 1 : end;
		}
	}
	for (int k = 0; k < te.n; k++)
		free(te.v[k].p);
	for (int k = 0; k < cl.n; k++)
		free(cl.v[k].p);
	for (int k = 0; k < tr.n; k++)
		free(tr.v[k].p);
	free(te.v);
	free(cl.v);
	free(tr.v);
	if (code / 100 == 1 || code == 204 || code == 304)
		return 0;
	if (chunked)
		return BODY_CHUNKED;
	return cl.n > 0 ? (long long)length : BODY_TO_THE_END;
}

// refused says an answer other than 101, as exec.go says server.StartExec's
// RefusedError (the first 4096 bytes of its body, trimmed), and exits 1;
// nothing ran. It returns, leaving the exec to Go, for a daemon from
// before POST /exec (404 "404 page not found", which the Go exec answers
// by finding the pod itself) and for a body it does not read (chunked): Go
// asks again.
static void refused(long long length, int code, size_t hdr, const struct timespec *deadline) {
	if (length == BODY_CHUNKED)
		return;
	// The body: its length, else up to the end of the connection; no more
	// than 4096 bytes (io.LimitReader), until the deadline.
	size_t want = length >= 0 && length < 4096 ? (size_t)length : 4096;
	while (in_len - hdr < want) {
		if (in_len == sizeof in)
			break;
		ssize_t n = read(conn, in + in_len, sizeof in - in_len);
		if (n > 0)
			in_len += (size_t)n;
		else if (n < 0 && errno == EINTR)
			continue;
		else if (n < 0 && errno == EAGAIN && wait_for(POLLIN, deadline, INTERRUPTED_BEFORE))
			continue;
		else
			break; // the end, an error or the deadline: what came is the message, as io.ReadAll's error is dropped
	}
	const char *msg = in + hdr;
	size_t n = in_len - hdr < want ? in_len - hdr : want;
	trim_space(&msg, &n);
	if (code == 404 && n == strlen("404 page not found") && memcmp(msg, "404 page not found", n) == 0)
		return;
	say_exit(msg, n, 1);
}

// cut_short reads an answer that stopped before its header's end (the
// connection's end, an error, the deadline) as http.ReadResponse does:
// its status line and header lines, the last one as far as it came, each
// fault said as it says it.
static void cut_short(void) {
	struct vals none = {0};
	status_code(in, in_len);
	read_header(in, in_len, "", &none);
}

static void quick_exec(int argc, char **argv) {
	struct args a;
	if (!parse_args(argc, argv, &a))
		return;
	// A closed stdin, stdout or stderr: the Go runtime opens /dev/null on
	// it first (checkfds); here the connection would take its number.
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) < 0)
			return;
	}
	const char *run_dir = a.run_dir;
	if (!run_dir) {
		run_dir = getenv(ENV_RUN_DIR);
		if (!run_dir || !*run_dir)
			run_dir = DEFAULT_RUN_DIR;
	}
	if (!run_dir_ok(run_dir))
		return;
	// filepath.Join(run_dir, SOCKET_NAME): slashes not repeated (run_dir_ok
	// took out the . and .. a Join would clean too).
	size_t dlen = 0;
	for (const char *c = run_dir; *c; c++) {
		if (*c == '/' && dlen > 0 && addr.sun_path[dlen - 1] == '/')
			continue;
		if (dlen + 2 + strlen(SOCKET_NAME) >= sizeof addr.sun_path)
			return;
		addr.sun_path[dlen++] = *c;
	}
	if (addr.sun_path[dlen - 1] != '/')
		addr.sun_path[dlen++] = '/';
	strcpy(addr.sun_path + dlen, SOCKET_NAME);

	// The request, as exec.go's query and server.StartExec write it.
	struct buf req = {0};
	puts_(&req, "POST /exec?");
	for (char **c = a.command; *c; c++)
		query_add(&req, "command", *c);
	if (a.container && *a.container)
		query_add(&req, "container", a.container);
	if (a.namespace && *a.namespace)
		query_add(&req, "namespace", a.namespace);
	query_add(&req, "pod", a.pod);
	puts_(&req, " HTTP/1.1\r\nHost: staticpodd\r\nUser-Agent: staticpodd\r\nContent-Length: 0\r\n"
		    "Connection: Upgrade\r\nUpgrade: " EXEC_PROTOCOL "\r\n\r\n");

	// SIGINT, SIGTERM and SIGHUP interrupt, as exec.go's NotifyContext has
	// them: blocked but in the waits.
	sigset_t block, orig;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &orig);
	waitmask = orig;
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGHUP);
	struct sigaction sa = {.sa_handler = on_signal}, old[3];
	int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);
	// The signals the Go runtime catches and takes no action on, unless a
	// program asks for them (SIGUSR1, SIGALRM from an inherited alarm,
	// SIGXFSZ past a file size limit, ...): a handler that does nothing,
	// where their default would end the exec and kill the command.
	// (SIGQUIT still ends it as its default does; Go's dumps its goroutines
	// and exits 2.)
	struct sigaction nop = {.sa_handler = on_nothing, .sa_flags = SA_RESTART}, old_nop[NOP_SIGNALS];
	int nops[NOP_SIGNALS], nnop = 0;
	for (int sig = 1; sig < NSIG && nnop < NOP_SIGNALS; sig++) {
		if (go_takes_no_action(sig)) {
			nops[nnop] = sig;
			sigaction(sig, &nop, &old_nop[nnop++]);
		}
	}

	struct timespec deadline;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += ANSWER_TIMEOUT_S;

	conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (conn < 0 || connect(conn, (struct sockaddr *)&addr, sizeof addr) != 0)
		goto to_go; // no daemon (the records answer), or an error Go says better

	// Until the 101 has come, nothing has run: a failure to send, and an
	// answer of which nothing came, are the Go exec's to ask again and say
	// (the daemon may have gone: Go then answers from its records).
	for (size_t off = 0; off < req.len;) {
		ssize_t n = send(conn, req.p + off, req.len - off, MSG_NOSIGNAL);
		if (n > 0) {
			off += (size_t)n;
		} else if (n < 0 && errno == EAGAIN) {
			if (!wait_for(POLLOUT, &deadline, INTERRUPTED_BEFORE))
				fail("the daemon did not answer the exec within " ANSWER_TIMEOUT_TEXT, 1);
		} else if (!(n < 0 && errno == EINTR)) {
			goto to_go;
		}
	}
	free(req.p);
	req.p = NULL;

	// The answer's header.
	size_t hdr;
	for (;;) {
		if ((hdr = header_end(in, in_len)) != 0)
			break;
		if (in_len == sizeof in) { // the status line, two headers and a note
			status_code(in, in_len);
			fail("read exec answer: the daemon's header is longer than 96 KiB", 1);
		}
		ssize_t n = read(conn, in + in_len, sizeof in - in_len);
		if (n > 0) {
			in_len += (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN) {
			if (!wait_for(POLLIN, &deadline, INTERRUPTED_BEFORE)) {
				if (in_len > 0)
					cut_short(); // what came, as Go reads it before its deadline
				fail("the daemon did not answer the exec within " ANSWER_TIMEOUT_TEXT, 1);
			}
		} else if (in_len > 0) {
			// The end, or an error once something came (bufio hands
			// over what it read and the next read ends).
			cut_short();
			fail("read exec answer: unexpected EOF", 1);
		} else {
			goto to_go; // nothing came: the daemon may have gone, and Go asks its records
		}
	}
	// As http.ReadResponse: the status line, the header's lines, then its
	// Transfer-Encoding and Content-Length, each fault said as it says it.
	int code = status_code(in, hdr);
	struct vals notes = {0};
	read_header(in, hdr, NOTE_HEADER, &notes);
	struct buf note = notes.n > 0 ? notes.v[0] : (struct buf){0};
	long long length = body_length(code, hdr);
	if (code != 101) {
		refused(length, code, hdr, &deadline);
		goto to_go;
	}
	// From here on an interrupt shuts the connection down where it comes.
	sigprocmask(SIG_SETMASK, &waitmask, NULL);
	if (note.len > 0) {
		struct buf b = {0};
		escape_but(&b, note.p, note.len, "");
		puts_(&b, "\n");
		write_all(2, b.p, b.len, 1);
		free(b.p);
	}
	free(note.p);
	in_off = hdr;

	// The frames, until the status.
	for (;;) {
		if (interrupted)
			fail(INTERRUPTED_AFTER, 130);
		while (in_len - in_off < 5) {
			int r = fill();
			if (r == 0)
				lost(in_len - in_off == 0 ? "EOF" : "unexpected EOF");
			if (r < 0)
				read_failed(LOST, errno);
		}
		const unsigned char *h = (const unsigned char *)in + in_off;
		uint32_t n = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
		unsigned char stream = h[0];
		if (n > MAX_FRAME) {
			char why[64];
			int k = 0;
			char digits[16];
			uint32_t m = n;
			do {
				digits[k++] = (char)('0' + m % 10);
				m /= 10;
			} while (m);
			size_t l = 0;
			memcpy(why, "exec frame too long: ", 21);
			l = 21;
			while (k > 0)
				why[l++] = digits[--k];
			memcpy(why + l, " bytes", 7);
			lost(why);
		}
		while (in_len - in_off < 5 + (size_t)n) {
			if (fill() <= 0)
				lost("read exec frame: unexpected EOF"); // ReadFrame's, whatever the error
		}
		const char *p = in + in_off + 5;
		in_off += 5 + (size_t)n;
		switch (stream) {
		case STREAM_STDOUT:
			write_all(1, p, n, 1);
			break;
		case STREAM_STDERR:
			write_all(2, p, n, 1);
			break;
		case STREAM_STATUS: {
			long long code = 0;
			struct buf msg = {0};
			if (!parse_status(p, n, &code, &msg))
				fail("decode the exit status: not the JSON of an exit status", 1);
			if (code == 0 && msg.len == 0)
				_exit(0);
			if (code <= 0 || code > 255)
				code = 1;
			say_exit(msg.p ? msg.p : "", msg.len, (int)code);
		}
		}
	}

to_go:
	if (conn >= 0)
		close(conn);
	conn = -1;
	free(req.p);
	// A signal that came meanwhile ends the exec here, as it would have
	// ended Go's.
	sigset_t pending;
	sigpending(&pending);
	for (int i = 0; i < 3; i++) {
		if (sigismember(&pending, sigs[i]) && !sigismember(&orig, sigs[i]))
			fail(INTERRUPTED_BEFORE, 130);
	}
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	for (int i = 0; i < nnop; i++)
		sigaction(nops[i], &old_nop[i], NULL);
	sigprocmask(SIG_SETMASK, &orig, NULL);
}

// A constructor runs before the Go runtime starts, as the container
// monitor's does (oci/monitor/monitor.c): an exec it serves never starts Go.
__attribute__((constructor)) static void staticpodd_quick_exec(int argc, char **argv, char **envp) {
	(void)envp;
	if (argc < 2 || strcmp(argv[1], "exec") != 0)
		return;
	// filepath.Base(argv[0]), as main takes it: trailing slashes dropped.
	size_t n = strlen(argv[0]);
	while (n > 1 && argv[0][n - 1] == '/')
		n--;
	const char *base = argv[0];
	for (size_t i = 0; i < n; i++) {
		if (argv[0][i] == '/' && i + 1 < n)
			base = argv[0] + i + 1;
	}
	if ((size_t)(argv[0] + n - base) == strlen(KUBELET_NAME) && strncmp(base, KUBELET_NAME, strlen(KUBELET_NAME)) == 0)
		return;
	quick_exec(argc, argv);
}
