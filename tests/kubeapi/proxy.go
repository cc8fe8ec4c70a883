//go:build linux

package kubeapi

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// FaultProxy stands between staticpodd and the API server, passing
// requests on with the node's client certificate, or failing them as told.
type FaultProxy struct {
	URL string

	mu   sync.Mutex
	mode string // "" passes, "5xx", "401", "slow"
	srv  *http.Server
}

// StartProxy starts a proxy to the API server that authenticates as node.
func (c *Cluster) StartProxy(node string) *FaultProxy {
	c.t.Helper()
	crt, key := c.PKI.Issue(c.t, "proxy", "proxy", nil, true)
	ncrt, nkey := c.PKI.Issue(c.t, "proxy-node-"+node, "system:node:"+node, []string{"system:nodes"}, false)
	serving, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		c.t.Fatal(err)
	}
	clientCert, err := tls.LoadX509KeyPair(ncrt, nkey)
	if err != nil {
		c.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.PKI.caCert)
	target, _ := url.Parse(c.Server())
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}}
	p := &FaultProxy{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	p.URL = "https://" + l.Addr().String()
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		mode := p.mode
		p.mu.Unlock()
		switch mode {
		case "5xx":
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","reason":"InternalError","code":500}`, http.StatusInternalServerError)
			return
		case "401":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
			return
		case "slow":
			select {
			case <-time.After(15 * time.Second):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}), TLSConfig: &tls.Config{Certificates: []tls.Certificate{serving}}}
	go p.srv.ServeTLS(l, "", "")
	c.t.Cleanup(func() { p.srv.Close() })
	return p
}

// Set makes the proxy pass requests ("") or fail them: "5xx", "401", or
// "slow" (15 s before passing on).
func (p *FaultProxy) Set(mode string) {
	switch mode {
	case "", "5xx", "401", "slow":
	default:
		panic(fmt.Sprintf("fault proxy: unknown mode %q", mode))
	}
	p.mu.Lock()
	p.mode = mode
	p.mu.Unlock()
	// Streams in flight (the pod watch) end too, as a failing server's would.
	p.srv.SetKeepAlivesEnabled(mode == "")
}
