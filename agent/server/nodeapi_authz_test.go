package server

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// Webhook authorization asks for the kubelet's subresource of each path,
// with the user's name and groups, and keeps the answers.
func TestNodeAPIWebhookAuthorization(t *testing.T) {
	c := newCA(t, "cluster-ca")
	api := &fakeAPIServer{allow: func(s authorizationv1.SubjectAccessReviewSpec) bool {
		return s.ResourceAttributes.Subresource == "stats" || s.ResourceAttributes.Subresource == "proxy"
	}}
	addr, serving := nodeServer(t, testNodeAgent(t), &Auth{ClientCAs: StaticCAs(c.pool), Access: api, AllowedTTL: time.Minute, DeniedTTL: time.Minute, NodeName: "node1"}, t.TempDir(), DefaultLimits(8))
	cl := tlsClient(serving, c.client(t, "monitor", "monitoring"))
	base := "https://" + addr
	for path, want := range map[string]int{
		"/stats/summary": 200, "/metrics": 403, "/metrics/cadvisor": 403, "/logs/": 403,
		"/pods": 200, "/containerLogs/default/web-node1/main": 200, "/configz": 200,
	} {
		if code, _, body := get(t, cl, base+path); code != want {
			t.Errorf("%s = %d %q, want %d", path, code, body, want)
		}
	}
	// A path that names stats but leads to logs is asked as logs.
	for _, p := range []string{"/stats/../logs/", "/stats/%2e%2e/logs/", "/stats/%2E%2E/logs/", "/stats/./../logs/"} {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: serving, ServerName: "node1", Certificates: []tls.Certificate{c.client(t, "monitor", "monitoring")}})
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(patience))
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: node1\r\nConnection: close\r\n\r\n", p)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s = %d, want 403 (nodes/log)", p, resp.StatusCode)
		}
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	subs := map[string]bool{}
	for _, s := range api.asked {
		ra := s.ResourceAttributes
		if s.User != "monitor" || !strings.Contains(fmt.Sprint(s.Groups), "monitoring") || !strings.Contains(fmt.Sprint(s.Groups), "system:authenticated") ||
			ra.Verb != "get" || ra.Resource != "nodes" || ra.Name != "node1" || ra.Version != "v1" {
			t.Errorf("asked %+v %+v", s, ra)
		}
		subs[ra.Subresource] = true
	}
	for _, want := range []string{"stats", "metrics", "log", "pods", "proxy", "configz"} {
		if !subs[want] {
			t.Errorf("no SubjectAccessReview for nodes/%s; asked %v", want, subs)
		}
	}
	// Cached: asking again sends nothing.
	n := len(api.asked)
	api.mu.Unlock()
	get(t, cl, base+"/stats/summary")
	get(t, cl, base+"/metrics")
	api.mu.Lock()
	if len(api.asked) != n {
		t.Errorf("repeated requests sent %d more SubjectAccessReviews, want 0", len(api.asked)-n)
	}
}

// Anonymous requests, when enabled, are system:anonymous in
// system:unauthenticated, and authorization still decides.
func TestNodeAPIAnonymous(t *testing.T) {
	api := &fakeAPIServer{allow: func(s authorizationv1.SubjectAccessReviewSpec) bool {
		return s.User == "system:anonymous" && s.ResourceAttributes.Subresource == "healthz"
	}}
	ca := newCA(t, "ca")
	addr, serving := nodeServer(t, testNodeAgent(t), &Auth{Anonymous: true, ClientCAs: StaticCAs(ca.pool), Access: api, NodeName: "node1"}, t.TempDir(), DefaultLimits(8))
	cl := tlsClient(serving)
	if code, _, _ := get(t, cl, "https://"+addr+"/healthz"); code != 200 {
		t.Errorf("anonymous /healthz = %d", code)
	}
	if code, _, _ := get(t, cl, "https://"+addr+"/pods"); code != 403 {
		t.Errorf("anonymous /pods = %d, want 403", code)
	}
	// A certificate of no client CA is not anonymous either.
	other := newCA(t, "other")
	if code, _, _ := get(t, tlsClient(serving, other.client(t, "x")), "https://"+addr+"/healthz"); code != 401 {
		t.Errorf("unverified certificate /healthz = %d, want 401", code)
	}
	// A token presented and refused is not anonymous.
	req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/healthz", nil)
	req.Header.Set("Authorization", "Bearer nobody")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("refused token /healthz = %d, want 401", resp.StatusCode)
	}
}

// With authentication.webhook.enabled false the kubelet has no token
// authenticator: a bearer token is no credential, neither refused nor
// checked, and the request is anonymous when that is on (the node e2e suite
// sends its token to a standalone kubelet configured so); a certificate of
// no client CA is still refused.
func TestNodeAPITokenWithoutTokenAuthn(t *testing.T) {
	ca := newCA(t, "ca")
	addr, serving := nodeServer(t, testNodeAgent(t), &Auth{Anonymous: true, NoTokenAuthn: true, ClientCAs: StaticCAs(ca.pool), NodeName: "node1"}, t.TempDir(), DefaultLimits(8))
	for name, c := range map[string]struct {
		cl   *http.Client
		want int
	}{
		"token alone":            {tlsClient(serving), 200},
		"token and a CA's cert":  {tlsClient(serving, ca.client(t, "admin")), 200},
		"token and another CA's": {tlsClient(serving, newCA(t, "other").client(t, "admin")), 401},
	} {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/configz", nil)
		req.Header.Set("Authorization", "Bearer anything")
		resp, err := c.cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: /configz = %d, want %d", name, resp.StatusCode, c.want)
		}
	}
}

// /logs/ serves what is beneath its directory and nothing else: no "..",
// no symbolic link (to a file or a directory out of it), no FIFO that would
// hang the request.

func TestSubresources(t *testing.T) {
	for path, want := range map[string]string{
		"/stats/summary": "stats", "/stats": "stats", "/statsx": "proxy", "/metrics/cadvisor": "metrics",
		"/logs/syslog": "log", "/containerLogs/a/b/c": "proxy", "/pods": "pods proxy", "/healthz": "healthz proxy",
		"/configz": "configz proxy", "/exec/a/b/c": "proxy", "/": "proxy",
	} {
		if got := strings.Join(subresources(path), " "); got != want {
			t.Errorf("subresources(%s) = %s, want %s", path, got, want)
		}
	}
}
