package server

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Check is how one auxiliary part of the daemon (the URL source, ...) is
// doing, for /healthz?verbose.
type Check struct {
	Name  string    // "manifest-url"
	Err   error     // nil when it works
	Since time.Time // when Err began
}

// Checker is implemented by an Agent whose auxiliary parts /healthz?verbose
// lists.
type Checker interface {
	Checks() []Check
}

// healthz answers 200 "ok" while the daemon serves, as the kubelet's does,
// whatever its auxiliary parts do: they never stop a pod, so a failing one
// does not make the daemon unhealthy. With ?verbose it lists them in the kube
// components' form, each failing one with its reason.
func healthz(a Agent) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if _, verbose := r.URL.Query()["verbose"]; !verbose {
			_, _ = w.Write([]byte("ok"))
			return
		}
		var b strings.Builder
		b.WriteString("[+]ping ok\n")
		if c, ok := a.(Checker); ok {
			for _, ch := range c.Checks() {
				if ch.Err == nil {
					fmt.Fprintf(&b, "[+]%s ok\n", ch.Name)
					continue
				}
				fmt.Fprintf(&b, "[-]%s failed since %s: %s\n", ch.Name, ch.Since.UTC().Format(time.RFC3339), oneLine(ch.Err.Error()))
			}
		}
		if nr, ok := a.(NodeReporter); ok {
			// Pressure never makes the daemon unhealthy: it evicts.
			for _, c := range nr.PressureConditions() {
				name := strings.ToLower(strings.TrimSuffix(string(c.Type), "Pressure")) + "-pressure"
				if c.Status != "True" {
					fmt.Fprintf(&b, "[+]%s ok\n", name)
					continue
				}
				fmt.Fprintf(&b, "[-]%s failed since %s: %s\n", name, c.LastTransitionTime.UTC().Format(time.RFC3339), c.Message)
			}
		}
		b.WriteString("healthz check passed\n")
		_, _ = w.Write([]byte(b.String()))
	}
}

func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}
