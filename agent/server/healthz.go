package server

import (
	"fmt"
	"net/http"
	"slices"
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

// SyncLooper is implemented by an Agent whose reconcile loop can wedge:
// /healthz fails with it, as the kubelet's "syncloop" check.
type SyncLooper interface {
	SyncLoopHealthCheck() error
}

// healthz answers 200 "ok" while the daemon serves and its reconcile loop
// runs, as the kubelet's does (ping and syncloop), whatever its auxiliary
// parts do: they never stop a pod, so a failing one does not make the
// daemon unhealthy. A wedged loop is 500, "[-]syncloop failed: reason
// withheld" as the kube components say it. With ?verbose it lists every
// check in the kube components' form, each failing one with its reason.
func healthz(a Agent) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		var loopErr error
		if sl, ok := a.(SyncLooper); ok {
			loopErr = sl.SyncLoopHealthCheck()
		}
		_, verbose := r.URL.Query()["verbose"]
		if loopErr != nil {
			w.WriteHeader(http.StatusInternalServerError)
			msg := "reason withheld"
			if verbose {
				msg = oneLine(loopErr.Error())
			}
			_, _ = fmt.Fprintf(w, "[+]ping ok\n[-]syncloop failed: %s\nhealthz check failed\n", msg)
			return
		}
		if !verbose {
			_, _ = w.Write([]byte("ok"))
			return
		}
		var b strings.Builder
		b.WriteString("[+]ping ok\n")
		if _, ok := a.(SyncLooper); ok {
			b.WriteString("[+]syncloop ok\n")
		}
		if c, ok := a.(Checker); ok {
			for _, ch := range c.Checks() {
				if ch.Err == nil {
					fmt.Fprintf(&b, "[+]%s ok\n", ch.Name)
					continue
				}
				fmt.Fprintf(&b, "[-]%s failed since %s:%s\n", ch.Name, ch.Since.UTC().Format(time.RFC3339), errorLines(ch.Err))
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

// errorLines is err after a check's "[-]name failed since T:": on the same
// line, its line breaks folded; errors joined (the mirror's lease, node and
// pods failing at once) each on a line of its own, indented so that none
// passes for a check, rather than run together.
func errorLines(err error) string {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) < 2 {
		return " " + oneLine(err.Error())
	}
	var b strings.Builder
	for _, e := range joined.Unwrap() {
		b.WriteString("\n    " + oneLine(e.Error()))
	}
	return b.String()
}

func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// healthzCheck serves /healthz/{name}: ping, syncloop, or one auxiliary
// part, "ok" or 500 with why, as the kube components serve each check.
func healthzCheck(a Agent) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		name := r.PathValue("name")
		var err error
		found := name == "ping"
		if sl, ok := a.(SyncLooper); ok && name == "syncloop" {
			found, err = true, sl.SyncLoopHealthCheck()
		}
		if c, ok := a.(Checker); ok && !found {
			for _, ch := range c.Checks() {
				if ch.Name == name {
					found, err = true, ch.Err
				}
			}
		}
		switch {
		case !found:
			http.NotFound(w, r)
		case err != nil:
			http.Error(w, "internal server error: "+oneLine(err.Error()), http.StatusInternalServerError)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}
}

// HealthzMaxConns caps the connections of the healthz port: kubeadm's and a
// load balancer's probes, one request each.
const HealthzMaxConns = 16

// HealthzPort returns the handler of the kubelet's healthz port
// (healthzPort, healthzBindAddress): the kubelet installs
// k8s.io/apiserver's healthz handler there with no checks of its own, which
// makes it the ping check alone (cmd/kubelet/app/server.go). So it answers
// "ok" for as long as the daemon serves, whatever the reconcile loop does,
// and so does this; the syncloop check and the rest are the read-only
// port's and the node API's /healthz. Any method is served, as there.
func HealthzPort() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var out strings.Builder
		// ?exclude=NAME, as the apiserver's handler takes it; only ping
		// can be excluded.
		unknown := map[string]bool{}
		for _, name := range q["exclude"] {
			unknown[name] = true
		}
		if unknown["ping"] {
			delete(unknown, "ping")
			out.WriteString("[+]ping excluded: ok\n")
		} else {
			out.WriteString("[+]ping ok\n")
		}
		if len(unknown) > 0 {
			names := make([]string, 0, len(unknown))
			for name := range unknown {
				names = append(names, fmt.Sprintf("%q", name))
			}
			slices.Sort(names)
			fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if _, verbose := q["verbose"]; !verbose {
			_, _ = w.Write([]byte("ok"))
			return
		}
		out.WriteString("healthz check passed\n")
		_, _ = w.Write([]byte(out.String()))
	})
	mux.HandleFunc("/healthz/ping", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}
