package monitor

import (
	"slices"
	"strings"
	"testing"
)

func TestSecretEnvRoundTrip(t *testing.T) {
	env := []string{"PATH=/bin", "A=1", "KEY=s3cr=t", "B=2", "EMPTY="}
	sealed, secret := SealEnv(env, map[string]bool{"KEY": true, "EMPTY": true})
	if want := []string{"PATH=/bin", "A=1", "KEY", "B=2", "EMPTY"}; !slices.Equal(sealed, want) {
		t.Errorf("sealed %q, want %q", sealed, want)
	}
	b, err := EncodeSecretEnv(secret)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSecretEnv(b)
	if err != nil {
		t.Fatal(err)
	}
	filled, err := FillEnv(sealed, got)
	if err != nil || !slices.Equal(filled, env) {
		t.Errorf("filled %q, %v; want %q", filled, err, env)
	}
	if e, _ := SealEnv(env, nil); !slices.Equal(e, env) {
		t.Errorf("sealed without names: %q", e)
	}
}

// TestSecretEnvRefusals: what the monitor is given cut short, or not
// matching its spec, fails the start; no error shows a value.
func TestSecretEnvRefusals(t *testing.T) {
	b, _ := EncodeSecretEnv([]string{"KEY=canary"})
	for name, b := range map[string][]byte{
		"cut":     b[:len(b)-1],
		"no name": []byte("=canary\x00"),
		"no =":    []byte("canary\x00"),
		"huge":    make([]byte, MaxSecretEnv+1),
	} {
		if _, err := DecodeSecretEnv(b); err == nil || strings.Contains(err.Error(), "canary") {
			t.Errorf("decode %s: %v; want an error without the value", name, err)
		}
	}
	if _, err := EncodeSecretEnv([]string{"KEY=can\x00ary"}); err == nil || !strings.Contains(err.Error(), "KEY") || strings.Contains(err.Error(), "can") {
		t.Errorf("encode with NUL: %v; want an error naming KEY only", err)
	}
	if _, err := EncodeSecretEnv([]string{"KEY=" + strings.Repeat("a", MaxSecretEnv)}); err == nil {
		t.Error("encode past MaxSecretEnv: accepted")
	}
	if _, err := FillEnv([]string{"A=1", "KEY"}, nil); err == nil || !strings.Contains(err.Error(), "KEY") {
		t.Errorf("fill without the value: %v", err)
	}
	if _, err := FillEnv([]string{"A=1"}, []string{"KEY=canary"}); err == nil || strings.Contains(err.Error(), "canary") {
		t.Errorf("fill with a value without its place: %v", err)
	}
}
