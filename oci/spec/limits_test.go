package spec

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestImageStringsBounded gives each option that takes a string an image
// decides a MiB of it: each refuses it, or one longer than the kernel takes,
// with an error that shows the value's start and its length, not the value.
func TestImageStringsBounded(t *testing.T) {
	rootfs := testRootfs(t)
	long := func(prefix string, n int) string { return prefix + strings.Repeat("a", n) }
	tests := []struct {
		name string
		opt  SpecOpt
		want string
	}{
		{"entrypoint", WithProcessArgs(long("/entry-", 1<<20)), `"/entry-aaa`},
		{"entrypoint past PATH_MAX", WithProcessArgs(long("/entry-", 4096)), `"/entry-aaa`},
		{"argument past MAX_ARG_STRLEN", WithProcessArgs("/bin/sh", long("arg-", 1<<20)), `"arg-aaa`},
		// An env entry's value may be a Secret's: its name alone is shown.
		{"env entry", WithEnv([]string{long("K=", 1<<20)}), `env[0] "K": longer`},
		{"env without a name", WithEnv([]string{long("=", 1<<20)}), `env[0]: empty name`},
		{"absolute WorkingDir", WithCwd("", long("/wd-", 1<<20)), `"/wd-aaa`},
		{"relative WorkingDir", WithCwd("", long("wd-", 1<<20)), `"wd-aaa`},
		{"user", WithUser(rootfs, nil, nil, long("user-", 1<<20), nil), `"user-aaa`},
		{"user not found", WithUser(rootfs, nil, nil, long("user-", 200), nil), `"user-aaa`},
		{"group", WithUser(rootfs, nil, nil, "app:"+long("group-", 1<<20), nil), `"group-aaa`},
		{"non-root user name", WithRunAsNonRoot(nil, long("user-", 1<<20)), `(user-aaa`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			s.Process.Args = []string{"sh"}
			err := tt.opt(s)
			if err == nil {
				t.Fatal("accepted")
			}
			if msg := err.Error(); len(msg) > 512 || !strings.Contains(msg, tt.want) {
				t.Errorf("error of %d bytes, want at most 512 showing %s: %.300s", len(msg), tt.want, msg)
			}
			if msg := err.Error(); strings.HasPrefix(tt.name, "env") && strings.Contains(msg, "aaa") {
				t.Errorf("error shows the env value: %.300s", msg)
			}
		})
	}
	// The longest that can run still does.
	s := Default()
	if err := WithProcessArgs(long("/", 4094), long("", 32*4096))(s); err != nil {
		t.Errorf("WithProcessArgs at the limits: %v", err)
	}
	if err := WithCwd("", long("/", 4094))(s); err != nil {
		t.Errorf("WithCwd at the limit: %v", err)
	}
}

// TestWithEnvManyEntries: an 8 MiB image config holds some 700,000
// environment entries. Merging them must take time in proportion, not
// their square (200,000 took minutes when each was searched for).
func TestWithEnvManyEntries(t *testing.T) {
	env := make([]string, 200000)
	for i := range env {
		env[i] = "K" + strconv.Itoa(i) + "="
	}
	s := Default()
	done := make(chan error, 1)
	go func() { done <- WithEnv(env)(s) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WithEnv of 200,000 entries still running after 10s")
	}
	if n := len(s.Process.Env); n != len(env) {
		t.Errorf("%d entries, want %d", n, len(env))
	}
}
