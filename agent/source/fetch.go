package source

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// DefaultURLTimeout bounds one request of the URL source, body included: the
// kubelet's (http.Client{Timeout: 10 * time.Second} in NewSourceURL).
const DefaultURLTimeout = 10 * time.Second

// MaxRedirects is how many redirects a request of the URL source follows, Go's
// default and so the kubelet's.
const MaxRedirects = 10

// maxCABundle bounds the CA bundle file read for every request.
const maxCABundle = 1 << 20

// IsURL reports whether arg names a manifest URL rather than a path.
func IsURL(arg string) bool {
	return strings.HasPrefix(arg, "http://") || strings.HasPrefix(arg, "https://")
}

// Redact is how a manifest URL is shown and named: a password in it reads
// "xxxxx". The URL source's pods are named after it too (UID, origin), so a
// new password does not replace them.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Redacted()
}

// Client makes the HTTP clients of the URL source: the kubelet's 10 s timeout,
// redirects bounded and never from https to http, the configured headers
// sent to the configured origin only, and TLS verified against
// the system roots plus an optional PEM bundle, which is read again whenever
// it changes (a rotated private CA needs no restart).
type Client struct {
	caFile  string
	timeout time.Duration

	mu     sync.Mutex // guards the fields below
	caSum  [sha256.Size]byte
	client *http.Client
}

// NewClient returns a client trusting the system roots and, when caFile is
// not empty, the certificates in it; timeout 0 means DefaultURLTimeout.
func NewClient(caFile string, timeout time.Duration) *Client {
	if timeout <= 0 {
		timeout = DefaultURLTimeout
	}
	return &Client{caFile: caFile, timeout: timeout}
}

// get returns the client to use now, made again when the CA bundle changed.
func (c *Client) get() (*http.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum [sha256.Size]byte
	var pool *x509.CertPool
	if c.caFile != "" {
		pem, err := readAtMost(c.caFile, maxCABundle)
		if err != nil {
			return nil, fmt.Errorf("read CA bundle %s: %w", c.caFile, err)
		}
		if sum = sha256.Sum256(pem); c.client != nil && sum == c.caSum {
			return c.client, nil
		}
		if pool, err = x509.SystemCertPool(); err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA bundle %s: no PEM certificate in it", c.caFile)
		}
	} else if c.client != nil {
		return c.client, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone() // proxies from the environment, as the kubelet's
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1, 1
	tr.MaxResponseHeaderBytes = 64 << 10
	if c.client != nil {
		c.client.CloseIdleConnections()
	}
	c.caSum = sum
	c.client = &http.Client{
		Timeout:   c.timeout,
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= MaxRedirects {
				return fmt.Errorf("stopped after %d redirects", MaxRedirects)
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect from https to %s refused", Redact(req.URL.String()))
			}
			if left(via[0].URL, append(via[1:], req)) {
				// The configured headers (staticPodURLHeader) are for the
				// configured origin only: a redirect elsewhere is followed
				// without any of them, nor the Referer, which can carry a
				// token of the URL's query. This is curl's rule without
				// --location-trusted, stricter than Go's (which drops only
				// Authorization and Cookie, and only for another domain):
				// following keeps a redirect to a pre-signed object URL
				// working, as the kubelet's, while a server that needed
				// the headers answers 401 or 403, which shows as the
				// source's error. Once a chain has left the origin, a hop
				// back does not carry them again (the way Go keeps
				// Authorization dropped): the other server chose its path.
				clear(req.Header)
			}
			return nil
		},
	}
	return c.client, nil
}

// origin is u's scheme, host and port, the port spelt out when it is the
// scheme's default, ASCII letters lower-cased: two URLs with the same origin
// name the same server (RFC 6454). Other letters are kept as they are, since
// Unicode lower-casing is not the IDNA mapping the transport dials by
// (strings.ToLower makes U+0130 "i", IDNA "i" and U+0307: another domain);
// two spellings of one name then count as two origins, which only drops the
// headers.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return asciiLower(u.Scheme) + "://" + net.JoinHostPort(asciiLower(u.Hostname()), port)
}

// asciiLower lower-cases the ASCII letters of s and nothing else.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// left reports whether any of the hops goes to another origin than first.
func left(first *url.URL, hops []*http.Request) bool {
	for _, h := range hops {
		if origin(h.URL) != origin(first) {
			return true
		}
	}
	return false
}

// Fetch GETs rawURL with header as the daemon does and returns the body of a
// 200 answer, at most manifest.MaxSize bytes. Its errors are short and stable
// for one cause (no addresses, ports or URL in them: the caller names the
// URL), so that a failure that repeats reads the same.
func (c *Client) Fetch(ctx context.Context, rawURL string, header http.Header) ([]byte, error) {
	body, _, err := c.fetch(ctx, rawURL, header, nil)
	return body, err
}

// fetch is Fetch, which stages a body that is a bundle (IsBundleBody) in a
// file when stage is set.
func (c *Client) fetch(ctx context.Context, rawURL string, header http.Header, stage *BundleStage) ([]byte, *Staged, error) {
	client, err := c.get()
	if err != nil {
		return nil, nil, err
	}
	var deadline *time.Timer
	if stage != nil {
		// The timeout of a request is the client's, unless its body is a
		// bundle, which has one of its own from its first bytes on: the
		// client's bounds the request with ctx instead.
		copied := *client
		copied.Timeout = 0
		client = &copied
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		deadline = time.AfterFunc(c.timeout, func() { cancel(errFetchTimeout) })
		defer deadline.Stop()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("bad URL: %w", unwrapURL(err))
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, c.reason("", timedOut(ctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// As the kubelet: anything but 200 is a failure, 204 and 304 too.
		// The reason phrase is the server's, up to the header limit long.
		return nil, nil, fmt.Errorf("HTTP %s", podspec.Truncate(resp.Status, podspec.MaxEventMessage))
	}
	r := io.Reader(resp.Body)
	if stage != nil {
		br := bufio.NewReaderSize(resp.Body, bundleSniff)
		if sniffBundle(resp.Header.Get("Content-Type"), br) {
			deadline.Reset(stage.Timeout)
			staged, err := stage.save(br, resp.ContentLength)
			if err != nil && errors.Is(context.Cause(ctx), errFetchTimeout) {
				err = fmt.Errorf("bundle: no complete body within %s", stage.Timeout)
			} else if err != nil {
				err = c.reason("bundle: ", err)
			}
			if err != nil {
				return nil, nil, err
			}
			return nil, staged, nil
		}
		r = br
	}
	if resp.ContentLength > manifest.MaxSize {
		return nil, nil, fmt.Errorf("body of %d bytes is larger than %d bytes", resp.ContentLength, manifest.MaxSize)
	}
	body, larger, err := readBody(r, resp.ContentLength, manifest.MaxSize)
	if err != nil {
		return nil, nil, c.reason("read body: ", timedOut(ctx, err))
	}
	if larger {
		return nil, nil, fmt.Errorf("body larger than %d bytes; cut off there", manifest.MaxSize)
	}
	return body, nil, nil
}

// bodyChunk is what readBody reads at a time when the size is not known.
const bodyChunk = 1 << 20

// readBody reads r to its end, unless it goes on past limit: then it stops at
// limit+1 bytes and says the body is larger. A body of the size the server
// announced (size, -1 when unknown) is read into one buffer of that size plus
// a byte to see its end. Else it is read in chunks, which are joined when the
// end comes within the limit and dropped when it does not: a body that never
// ends costs limit+1 bytes, not the twice as much of a buffer that doubles.
func readBody(r io.Reader, size int64, limit int) (body []byte, larger bool, err error) {
	if size >= 0 && size <= int64(limit) {
		buf := make([]byte, size+1)
		n, err := readFull(r, buf)
		if err != nil {
			return nil, false, err
		}
		if n > int(size) {
			// The transport stops at the announced size; a reader that
			// does not is refused rather than read on.
			return nil, false, fmt.Errorf("body longer than the %d bytes announced", size)
		}
		return buf[:n:n], false, nil
	}
	var chunks [][]byte
	total := 0
	for total <= limit {
		want := min(bodyChunk, limit+1-total)
		if total == 0 {
			want = min(64<<10, want) // most manifests are a few KiB
		}
		c := make([]byte, want)
		n, err := readFull(r, c)
		if err != nil {
			return nil, false, err
		}
		chunks = append(chunks, c[:n])
		total += n
		if n < want {
			break // the end
		}
	}
	if total > limit {
		return nil, true, nil
	}
	body = make([]byte, 0, total)
	for _, c := range chunks {
		body = append(body, c...)
	}
	return body, false, nil
}

// readFull reads into buf until it is full or r ends; an end is no error.
func readFull(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// reason turns a request error into a stable message that keeps its cause.
func (c *Client) reason(prefix string, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return &stableError{fmt.Sprintf("%sno complete answer within %s", prefix, c.timeout), err}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return &stableError{fmt.Sprintf("DNS lookup of %s: %s", dns.Name, dns.Err), err}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		inner := op.Err
		var sys *os.SyscallError
		if errors.As(inner, &sys) {
			inner = sys.Err
		}
		return &stableError{fmt.Sprintf("%s%s: %v", prefix, op.Op, inner), err}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &stableError{prefix + "the connection closed before the end of the body (truncated)", err}
	}
	return &stableError{prefix + unwrapURL(err).Error(), err}
}

// unwrapURL drops the `Get "<url>": ` that *url.Error puts first.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// stableError says why a request failed in words that stay the same for the
// same cause; Unwrap gives the error it came from.
type stableError struct {
	msg string
	err error
}

func (e *stableError) Error() string { return e.msg }
func (e *stableError) Unwrap() error { return e.err }
