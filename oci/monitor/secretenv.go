package monitor

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// A container's sensitive environment (the values that came from a Secret)
// is never in its config.json: there, each such variable is its bare NAME,
// without "=", which no runtime takes for a variable (libcontainer refuses
// it), in its place among the others. The daemon hands the monitor the
// NAME=value entries over the go pipe, after the go byte; the monitor
// fills them in for the container's process and keeps them in a sealed
// memfd for as long as the container runs (State.SecretEnvFd), where an
// exec in the container (runc exec's environment is the container's)
// finds them. So the values are in memory only: never in a file of the
// run dir, and a daemon that adopts the container needs none of them.

// MaxSecretEnv bounds the sensitive environment of a container: more than
// execve(2) takes of arguments and environment together (3/4 of the
// kernel's _STK_LIM) cannot run anyway.
const MaxSecretEnv = 6 << 20

// EncodeSecretEnv is the form of NAME=value entries on the go pipe and in
// the memfd: each ends with a NUL, which an environment entry cannot hold.
func EncodeSecretEnv(kvs []string) ([]byte, error) {
	var b bytes.Buffer
	for _, kv := range kvs {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("secret env %q: not NAME=value", name)
		}
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, fmt.Errorf("secret env %s: contains a NUL byte", name)
		}
		b.WriteString(kv)
		b.WriteByte(0)
	}
	if b.Len() > MaxSecretEnv {
		return nil, fmt.Errorf("secret env of %d bytes: more than a process can be given (%d)", b.Len(), MaxSecretEnv)
	}
	return b.Bytes(), nil
}

// DecodeSecretEnv reads what EncodeSecretEnv wrote; a cut one (no final
// NUL) is an error.
func DecodeSecretEnv(b []byte) ([]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) > MaxSecretEnv || b[len(b)-1] != 0 {
		return nil, fmt.Errorf("secret env of %d bytes: cut short or too long", len(b))
	}
	var kvs []string
	for e := range bytes.SplitSeq(b[:len(b)-1], []byte{0}) {
		name, _, ok := bytes.Cut(e, []byte("="))
		if !ok || len(name) == 0 {
			return nil, errors.New("secret env: an entry is not NAME=value")
		}
		kvs = append(kvs, string(e))
	}
	return kvs, nil
}

// SealEnv returns env with each entry whose name is in names replaced by
// the bare name, and those entries (NAME=value), in order.
func SealEnv(env []string, names map[string]bool) (sealed, secret []string) {
	if len(names) == 0 {
		return env, nil
	}
	sealed = make([]string, len(env))
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if names[name] {
			sealed[i] = name
			secret = append(secret, kv)
			continue
		}
		sealed[i] = kv
	}
	return sealed, secret
}

// FillEnv is SealEnv undone: env with each bare NAME replaced by its entry
// of secret. A bare name without one, or an entry of secret that has no
// place, is an error naming the variable, never showing a value.
func FillEnv(env, secret []string) ([]string, error) {
	if len(secret) == 0 && !hasBare(env) {
		return env, nil
	}
	byName := make(map[string]string, len(secret))
	for _, kv := range secret {
		name, _, _ := strings.Cut(kv, "=")
		byName[name] = kv
	}
	out := make([]string, len(env))
	used := map[string]bool{}
	for i, kv := range env {
		if strings.IndexByte(kv, '=') >= 0 {
			out[i] = kv
			continue
		}
		v, ok := byName[kv]
		if !ok {
			return nil, fmt.Errorf("env %q: its value (from a Secret) was not given", kv)
		}
		out[i] = v
		used[kv] = true
	}
	if len(used) != len(byName) {
		return nil, fmt.Errorf("%d secret env entries given, %d in the spec", len(byName), len(used))
	}
	return out, nil
}

func hasBare(env []string) bool {
	for _, kv := range env {
		if strings.IndexByte(kv, '=') < 0 {
			return true
		}
	}
	return false
}
