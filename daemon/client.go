package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/staticpodd/staticpodd/agent/config"
)

// Client is the command line's: it talks HTTP to the daemon over its CLI
// socket.
type Client struct {
	socket  string
	connect func(context.Context) (net.Conn, error)
	http    *http.Client
}

// NewClient is the client of the daemon whose CLI socket is socket.
func NewClient(socket string) *Client {
	return newClient(socket, func(ctx context.Context) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, "unix", socket) })
}

// NewRecordsClient is the client of the daemon of rootDir and runDir that,
// while no daemon runs, reads the records it left, saying so on w
// (Connector).
func NewRecordsClient(rootDir, runDir string, w io.Writer) *Client {
	return newClient(filepath.Join(runDir, SocketName), NewConnector(rootDir, runDir, w).Dial)
}

func newClient(socket string, connect func(context.Context) (net.Conn, error)) *Client {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) { return connect(ctx) }
	return &Client{socket: socket, connect: connect, http: &http.Client{Transport: &http.Transport{DialContext: dial}}}
}

// requestTimeout bounds a request that is not a stream.
const requestTimeout = 10 * time.Second

// Get returns the daemon's answer for path.
func (c *Client) Get(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s from the daemon: %w", path, err)
	}
	return body, nil
}

// Stream copies the daemon's answer for path to w as it comes, until it ends
// or ctx does.
func (c *Client) Stream(ctx context.Context, path string, w io.Writer) error {
	resp, err := c.Open(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil && ctx.Err() == nil {
		return fmt.Errorf("read %s from the daemon: %w", path, err)
	}
	return nil
}

// Open sends GET path and returns a 200 response, or an error naming what the
// daemon said.
func (c *Client) Open(ctx context.Context, path string) (*http.Response, error) {
	return c.do(ctx, http.MethodGet, path)
}

// PostJSON sends POST path, which changes something in the daemon, and
// decodes its JSON answer into v.
func (c *Client) PostJSON(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.do(ctx, http.MethodPost, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v); err != nil {
		return fmt.Errorf("decode %s from the daemon: %w", path, err)
	}
	return nil
}

func (c *Client) do(ctx context.Context, method, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://staticpodd"+path, nil)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", path, err)
	}
	resp, err := c.http.Do(req)
	if notListening(err) {
		return nil, c.notRunning()
	}
	if err != nil {
		return nil, fmt.Errorf("ask the daemon for %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("%s", strings.TrimSpace(string(body)))
	}
	return resp, nil
}

// Dial opens a connection to the daemon's socket, for a protocol of its own.
func (c *Client) Dial(ctx context.Context) (net.Conn, error) {
	conn, err := c.connect(ctx)
	if notListening(err) {
		return nil, c.notRunning()
	}
	if err != nil {
		return nil, fmt.Errorf("connect to the daemon: %w", err)
	}
	return conn, nil
}

func notListening(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED)
}

func (c *Client) notRunning() error {
	return fmt.Errorf("staticpodd is not running (nothing listens on %s; is --run-dir, or %s, right?)", c.socket, config.EnvRunDir)
}

// GetJSON decodes the daemon's JSON answer for path into v.
func (c *Client) GetJSON(ctx context.Context, path string, v any) error {
	body, err := c.Get(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode %s from the daemon: %w", path, err)
	}
	return nil
}
