package policy

// The libraries verification is built on, imported here until the code that
// uses them lands, so that every branch shares one go.sum.
import (
	_ "github.com/sigstore/sigstore-go/pkg/bundle"
	_ "github.com/sigstore/sigstore-go/pkg/root"
	_ "github.com/sigstore/sigstore-go/pkg/sign"
	_ "github.com/sigstore/sigstore-go/pkg/verify"
	_ "github.com/sigstore/sigstore/pkg/cryptoutils"
	_ "github.com/sigstore/sigstore/pkg/signature"
)
