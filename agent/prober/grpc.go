package prober

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// The grpc.health.v1.Health/Check call, spoken directly over unencrypted
// HTTP/2 with net/http: the request and the response are one field each, so
// the whole of grpc-go (several MiB of binary and its init work) is not worth
// it here. What goes over the wire is what grpc-go sends: a length-prefixed
// protobuf message, "te: trailers", and the status in the grpc-status
// trailer (or the headers, for a trailers-only answer).

// servingStatus names grpc.health.v1.HealthCheckResponse.ServingStatus.
var servingStatus = map[uint64]string{0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}

// grpc status codes the kubelet's prober words differently.
const (
	grpcDeadlineExceeded = 4
	grpcUnimplemented    = 12
)

// doGRPC is the kubelet's grpcprobe.Probe, messages included.
func doGRPC(ctx context.Context, addr, service string, dial Dialer, timeout time.Duration) (Result, string, error) {
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	// The status message comes in the headers or trailers, which a server
	// could make as long as the transport lets it: maxHeaders.
	client := &http.Client{Transport: &http.Transport{DialContext: dial, Protocols: &protos, Proxy: nil,
		MaxResponseHeaderBytes: maxHeaders}}
	defer client.CloseIdleConnections()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check",
		bytes.NewReader(grpcFrame(healthRequest(service))))
	if err != nil {
		return Unknown, "", err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.Header.Set("User-Agent", "kube-probe/"+kubeMinor)
	req.Header.Set("Grpc-Timeout", strconv.FormatInt(max(timeout.Milliseconds(), 1), 10)+"m")
	res, err := client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Failure, fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, err), nil
		}
		return Failure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), nil
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxOutput))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %v", err), nil
	}
	if res.StatusCode != http.StatusOK {
		return Failure, fmt.Sprintf("error: health rpc probe failed: HTTP status %d", res.StatusCode), nil
	}
	code, msg := grpcStatus(res)
	switch {
	case code == grpcUnimplemented:
		return Failure, "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): " + msg, nil
	case code == grpcDeadlineExceeded:
		return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
	case code != 0:
		return Failure, fmt.Sprintf("error: health rpc probe failed: rpc error: code = %d desc = %s", code, msg), nil
	}
	status, err := healthResponse(body)
	if err != nil {
		return Failure, "error: health rpc probe failed: " + err.Error(), nil
	}
	if status != 1 {
		name, ok := servingStatus[status]
		if !ok {
			name = strconv.FormatUint(status, 10)
		}
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", name), nil
	}
	return Success, "service healthy", nil
}

// grpcStatus is the call's status code and message: from the trailers, or
// from the headers of a trailers-only response, the message cut to
// maxOutput as any other probe output. A missing status is Unknown (2).
func grpcStatus(res *http.Response) (int, string) {
	h := res.Trailer
	if h.Get("Grpc-Status") == "" {
		h = res.Header
	}
	s := h.Get("Grpc-Status")
	code, err := strconv.Atoi(s)
	if err != nil {
		return 2, fmt.Sprintf("malformed or missing grpc-status %q", s)
	}
	msg, err := url.PathUnescape(h.Get("Grpc-Message"))
	if err != nil {
		msg = h.Get("Grpc-Message")
	}
	return code, podspec.Truncate(msg, maxOutput)
}

// healthRequest encodes HealthCheckRequest{service: service}.
func healthRequest(service string) []byte {
	if service == "" {
		return nil
	}
	b := []byte{0x0a} // field 1, length-delimited
	b = binary.AppendUvarint(b, uint64(len(service)))
	return append(b, service...)
}

// grpcFrame prefixes msg with the gRPC message header: not compressed, length.
func grpcFrame(msg []byte) []byte {
	b := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	return append(b, msg...)
}

// healthResponse decodes the one framed HealthCheckResponse in body and
// returns its status (field 1; absent is 0, UNKNOWN).
func healthResponse(body []byte) (uint64, error) {
	if len(body) < 5 {
		return 0, errors.New("no response message")
	}
	if body[0] != 0 {
		return 0, errors.New("compressed response message")
	}
	n := binary.BigEndian.Uint32(body[1:5])
	msg := body[5:]
	if uint32(len(msg)) < n {
		return 0, errors.New("truncated response message")
	}
	msg = msg[:n]
	var status uint64
	for len(msg) > 0 {
		tag, k := binary.Uvarint(msg)
		if k <= 0 {
			return 0, errors.New("malformed response message")
		}
		msg = msg[k:]
		field, wire := tag>>3, tag&7
		switch wire {
		case 0:
			v, k := binary.Uvarint(msg)
			if k <= 0 {
				return 0, errors.New("malformed response message")
			}
			msg = msg[k:]
			if field == 1 {
				status = v
			}
		case 1:
			if len(msg) < 8 {
				return 0, errors.New("malformed response message")
			}
			msg = msg[8:]
		case 2:
			l, k := binary.Uvarint(msg)
			if k <= 0 || uint64(len(msg)-k) < l {
				return 0, errors.New("malformed response message")
			}
			msg = msg[k+int(l):]
		case 5:
			if len(msg) < 4 {
				return 0, errors.New("malformed response message")
			}
			msg = msg[4:]
		default:
			return 0, errors.New("malformed response message")
		}
	}
	return status, nil
}
