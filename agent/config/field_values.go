package config

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// valuer is a Config field of some type.
type valuer interface {
	show(c *Config) string
	copy(dst, src *Config)
	// fromFile sets the value from the defaulted file, if a file field
	// gives it.
	fromFile(c *Config, kc *kubeletConfiguration) error
	// setString sets a string value from a flag; false for other types.
	setString(c *Config, v string) bool
	// addr is the field's address in c, for the test that every Config
	// field has exactly one row.
	addr(c *Config) any
}

// value is a Config field of type T: at gives its address, render shows it,
// kubelet (if any) reads it from the defaulted file, and def is the
// default of a value no file field gives.
type value[T any] struct {
	at      func(*Config) *T
	render  func(T) string
	kubelet func(*kubeletConfiguration) (T, error)
	def     func() T
}

func (v value[T]) show(c *Config) string { return v.render(*v.at(c)) }
func (v value[T]) copy(dst, src *Config) { *v.at(dst) = *v.at(src) }
func (v value[T]) addr(c *Config) any    { return v.at(c) }

func (v value[T]) fromFile(c *Config, kc *kubeletConfiguration) error {
	switch {
	case v.kubelet != nil:
		x, err := v.kubelet(kc)
		if err != nil {
			return err
		}
		*v.at(c) = x
	case v.def != nil:
		*v.at(c) = v.def()
	}
	return nil
}

func (v value[T]) setString(c *Config, s string) bool {
	p, ok := any(v.at(c)).(*string)
	if ok {
		*p = s
	}
	return ok
}

// kubelet reads a value from the defaulted KubeletConfiguration.
func kubelet[T any](f func(*kubeletConfiguration) T) func(*kubeletConfiguration) (T, error) {
	return func(kc *kubeletConfiguration) (T, error) { return f(kc), nil }
}

// constant is a default of ours.
func constant[T any](v T) func() T { return func() T { return v } }

func plain(s string) string { return s }

func sprint[T any](v T) string { return fmt.Sprint(v) }

func duration(d time.Duration) string { return d.String() }

func commas(s []string) string { return strings.Join(s, ",") }

func kv(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, ",")
}

// redactedHeader shows header names only: values are often credentials
// (Authorization), and the config is printed and logged.
func redactedHeader(h http.Header) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"=(redacted)")
	}
	return strings.Join(parts, ",")
}

// redactURL hides a password in a URL ("xxxxx").
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

func taints(ts []v1.Taint) string {
	parts := make([]string, 0, len(ts))
	for _, t := range ts {
		parts = append(parts, t.ToString())
	}
	return strings.Join(parts, ",")
}

func quantity(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }
