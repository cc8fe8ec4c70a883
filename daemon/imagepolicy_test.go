package daemon

import (
	"errors"
	"fmt"
	"testing"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// A refusal wrapped by the puller reads from SignatureValidationFailed on,
// as a CRI runtime gives it, and is still the policy's error; any other
// error is left as it is.
func TestRefusal(t *testing.T) {
	refused := fmt.Errorf("pull docker.io/library/nginx:1.27: %w: no signature by key cosign.pub", policy.ErrSignatureValidationFailed)
	err := refusal(refused)
	if got, want := err.Error(), "SignatureValidationFailed: no signature by key cosign.pub"; got != want {
		t.Errorf("refusal: %q, want %q", got, want)
	}
	if !errors.Is(err, policy.ErrSignatureValidationFailed) {
		t.Error("the refusal no longer wraps the policy's error")
	}
	other := errors.New("pull docker.io/library/nginx:1.27: MANIFEST_UNKNOWN")
	if refusal(other) != other {
		t.Error("another error was changed")
	}
	if refusal(nil) != nil {
		t.Error("nil is not nil")
	}
}
