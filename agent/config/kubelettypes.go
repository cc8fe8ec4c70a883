package config

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeletConfiguration and the types it uses (zz_generated.kubelettypes.go)
// are copies of k8s.io/kubelet/config/v1beta1's, generated and kept in sync
// by TestKubeletTypes, so that the binary does not link that package and,
// through k8s.io/component-base, prometheus, OpenTelemetry and protobuf.
// Every process of this binary pays for their package inits, every
// container's monitor and init re-exec included.

// timeOrMetaDuration is k8s.io/component-base/logs/api/v1.TimeOrMetaDuration
// with its JSON methods: a duration string, or an integer of nanoseconds.
type timeOrMetaDuration struct {
	Duration          metav1.Duration
	SerializeAsString bool `json:"-"`
}

func (t timeOrMetaDuration) MarshalJSON() ([]byte, error) {
	if t.SerializeAsString {
		return t.Duration.MarshalJSON()
	}
	return json.Marshal(t.Duration.Duration)
}

func (t *timeOrMetaDuration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		t.SerializeAsString = true
		return json.Unmarshal(b, &t.Duration)
	}
	t.SerializeAsString = false
	if err := json.Unmarshal(b, &t.Duration.Duration); err != nil {
		return fmt.Errorf("invalid duration %q: %w", string(b), err)
	}
	return nil
}
