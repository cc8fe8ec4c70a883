package image

import (
	"strings"
	"testing"
)

// Imports that run side by side (pulls from two registries, or a critical
// pod's pull beside another) share the free space above the reserve: each
// alone fits, both together would eat the reserve, so the second to charge
// is refused.
func TestConcurrentImportsShareReserve(t *testing.T) {
	s := openStore(t)
	// 100 GiB, 50 free: 15 GiB reserved, 35 GiB for the imports.
	s.statfs = func(string) (uint64, uint64, error) { return 50 << 30, 100 << 30, nil }
	a, err := s.newSpace()
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.newSpace()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.takeFile(20 << 30); err != nil {
		t.Fatalf("first import's 20 GiB of 35: %v", err)
	}
	err = b.takeFile(20 << 30)
	if err == nil || !strings.Contains(err.Error(), "would leave less than 15%") {
		t.Fatalf("second import's 20 GiB while the first holds 20 of 35: err = %v, want the reserve's refusal", err)
	}
	if err := b.takeFile(10 << 30); err != nil {
		t.Fatalf("second import's 10 GiB while the first holds 20 of 35: %v", err)
	}
	a.release()
	b.release()

	// Alone, an import has all 35 GiB, as before.
	c, err := s.newSpace()
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	if err := c.takeFile(35 << 30); err != nil {
		t.Fatalf("a lone import's 35 GiB of 35: %v", err)
	}
}
