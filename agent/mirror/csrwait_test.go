package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/staticpodd/staticpodd/agent/mirror/certificate"
)

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// An API server that answers the wait for a CSR (a watch of it alone, by
// its name) with a stream of other CSRs does not make the node hold them:
// client-go's reflector keeps what a streamed list sends until its
// initial-events-end bookmark, so each name the server makes up would stay
// in memory until the wait's 15 minutes are over. The CSR asked for is
// still found after them.
func TestCSRWaitHoldsNoOtherCSRs(t *testing.T) {
	const (
		others = 256
		size   = 256 << 10 // bytes of each other CSR's request
		bound  = 24 << 20  // of the heap's growth while they stream
	)
	typeMeta := metav1.TypeMeta{Kind: "CertificateSigningRequest", APIVersion: "certificates.k8s.io/v1"}
	ours := certificatesv1.CertificateSigningRequest{
		TypeMeta:   typeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1", UID: "uid-1", ResourceVersion: "2"},
		Status: certificatesv1.CertificateSigningRequestStatus{
			Conditions:  []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue}},
			Certificate: []byte("the certificate"),
		},
	}
	var mu sync.Mutex
	var grown uint64
	var streamed bool
	base := heapInUse()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") != "true" {
			json.NewEncoder(w).Encode(&certificatesv1.CertificateSigningRequestList{
				TypeMeta: metav1.TypeMeta{Kind: "CertificateSigningRequestList", APIVersion: "certificates.k8s.io/v1"},
				ListMeta: metav1.ListMeta{ResourceVersion: "2"},
				Items:    []certificatesv1.CertificateSigningRequest{ours},
			})
			return
		}
		enc := json.NewEncoder(w)
		mu.Lock()
		first := !streamed
		streamed = true
		mu.Unlock()
		if first {
			req := make([]byte, size)
			for i := range others {
				other := certificatesv1.CertificateSigningRequest{TypeMeta: typeMeta,
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-%d", i), UID: "x", ResourceVersion: "1"},
					Spec:       certificatesv1.CertificateSigningRequestSpec{Request: req}}
				if enc.Encode(map[string]any{"type": "ADDED", "object": &other}) != nil {
					return
				}
			}
			w.(http.Flusher).Flush()
			if now := heapInUse(); now > base {
				mu.Lock()
				grown = now - base
				mu.Unlock()
			}
		}
		enc.Encode(map[string]any{"type": "ADDED", "object": &ours})
		enc.Encode(map[string]any{"type": "BOOKMARK", "object": &certificatesv1.CertificateSigningRequest{TypeMeta: typeMeta,
			ObjectMeta: metav1.ObjectMeta{ResourceVersion: "2", Annotations: map[string]string{"k8s.io/initial-events-end": "true"}}}})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	client, err := newCSRClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crt, err := certificate.WaitForCertificate(ctx, client, "csr-1", "uid-1")
	if err != nil {
		t.Errorf("WaitForCertificate: %v", err)
	} else if string(crt) != "the certificate" {
		t.Errorf("certificate %q", crt)
	}
	mu.Lock()
	defer mu.Unlock()
	if !streamed {
		t.Fatal("no watch was made")
	}
	t.Logf("heap grown by %d KiB while %d other CSRs of %d KiB streamed", grown>>10, others, size>>10)
	if grown > bound {
		t.Errorf("the heap grew by %d MiB while %d other CSRs of %d KiB streamed: they are held (bound %d MiB)", grown>>20, others, size>>10, bound>>20)
	}
}
