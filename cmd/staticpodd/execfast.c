//go:build linux

// The quick `staticpodd exec`: the CLI's exec in C, before the Go runtime
// starts. See execfast_linux.go for when it serves and when it leaves the
// exec to Go; exec.go is the one full implementation, which this mirrors
// message for message on the way it takes (tests/execfast_test.go holds the
// two to the same output). Its parts, included here as one translation
// unit: execfast_text.h (strings as Go writes them), execfast_json.h (the
// status frame), execfast_http.h (the daemon's answer as net/http reads it).

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

#include "execfast_text.h"
#include "execfast_json.h"
#include "execfast_http.h"

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
	long long length = body_length(in, code, hdr);
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
