package image

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"
)

// isLoopback reports whether a registry host (host[:port]) is this machine:
// localhost, 127.0.0.0/8 or ::1 (containerd's docker.IsLocalhost).
func isLoopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackEndpoint is where a registry on the loopback with no hosts.toml is
// pulled from, as containerd's config.ConfigureHosts decides: port 80 is
// plain HTTP; no port or 443 is HTTPS; any other port is HTTPS first and
// plain HTTP when the server answers the TLS hello in HTTP. The server's
// certificate is not verified: anything that can listen on the loopback
// could as well serve plain HTTP.
func loopbackEndpoint(registry string, timeout time.Duration) endpoint {
	ep := endpoint{scheme: "https", host: registry, path: "/v2", caps: []string{capPull, capResolve},
		client: newClient(&tls.Config{InsecureSkipVerify: true}, timeout)}
	_, port, _ := net.SplitHostPort(registry)
	switch port {
	case "80":
		ep.scheme = "http"
	case "", "443":
	default:
		ep.fallback = true
	}
	return ep
}

// send sends r, and for an endpoint that may fall back, sends it again over
// plain HTTP when the server answered TLS in HTTP; every later request of
// the pull to that host then goes over plain HTTP
// (containerd's docker.NewHTTPFallback).
func (t *endpointTransport) send(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if !t.ep.fallback || r.URL.Host != t.ep.host || r.URL.Scheme != "https" || !httpAnswer(err) {
		return resp, err
	}
	if r.Body != nil && r.Body != http.NoBody {
		if r.GetBody == nil {
			return resp, err
		}
		body, gerr := r.GetBody()
		if gerr != nil {
			return resp, err
		}
		r = r.Clone(r.Context())
		r.Body = body
	} else {
		r = r.Clone(r.Context())
	}
	t.plain.Store(true)
	r.URL.Scheme = "http"
	return t.next.RoundTrip(r)
}

// httpAnswer reports whether err is a TLS hello answered in plain HTTP.
func httpAnswer(err error) bool {
	var rh tls.RecordHeaderError
	return errors.As(err, &rh) && string(rh.RecordHeader[:]) == "HTTP/"
}
