package manifest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const orderNode = "node1"

func orderManifest(name, after string) string {
	ann := ""
	if after != "" {
		ann = fmt.Sprintf("  annotations:\n    %s: %q\n", AnnotationStartAfter, after)
	}
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n%sspec:\n  containers:\n  - name: c\n    image: busybox\n", name, ann)
}

// The annotation's syntax is checked per manifest, naming the field.
func TestStartAfterSyntax(t *testing.T) {
	for _, tc := range []struct {
		value string
		err   string // "" for valid
		names []string
	}{
		{value: "etcd", names: []string{"etcd"}},
		{value: " etcd , kube-apiserver ", names: []string{"etcd", "kube-apiserver"}},
		{value: "", names: nil},
		{value: "etcd,,b", err: "empty name"},
		{value: "etcd,", err: "empty name"},
		{value: "Etcd", err: "RFC 1123"},
		{value: "etcd,etcd", err: "names \"etcd\" twice"},
		{value: "a/b", err: "RFC 1123"},
		{value: strings.Repeat("a", 254), err: "no more than 253"},
		{value: strings.Repeat("a,", 33) + "a", err: "more than 32 pods"},
		{value: strings.Repeat(",", 10000), err: "more than 32 pods"},
		{value: tenThousandNames(), err: "more than 32 pods"},
		{value: strings.Repeat("x", 200<<10), err: "no more than 253"},
		{value: "etcd,\x00\u202e", err: "RFC 1123"},
	} {
		p := Check([]byte(orderManifest("web", tc.value)), SourceFile, "/m/web.yaml", orderNode)
		if tc.err == "" {
			if len(p.Errors) > 0 {
				t.Errorf("%.40q: %v", tc.value, p.Err())
				continue
			}
			if got := StartAfter(p.Pods[0].Pod); fmt.Sprint(got) != fmt.Sprint(tc.names) {
				t.Errorf("%.40q: names %q, want %q", tc.value, got, tc.names)
			}
			continue
		}
		err := p.Err()
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "metadata.annotations[staticpodd.io/start-after]") {
			t.Errorf("%.40q: error %v, want the field and %q", tc.value, err, tc.err)
		}
		if len(err.Error()) > 4096 {
			t.Errorf("%.40q: an error of %d bytes", tc.value, len(err.Error()))
		}
	}
}

func tenThousandNames() string {
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("pod%d", i)
	}
	return strings.Join(names, ",")
}

func orderPods(t *testing.T, after map[string]string) map[string]Pod {
	t.Helper()
	pods := map[string]Pod{}
	for name, a := range after {
		pods["default/"+name+"-"+orderNode] = Pod{
			Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + orderNode, Namespace: "default",
				Annotations: map[string]string{AnnotationStartAfter: a}}},
			Origin: "/m/" + name + ".yaml",
		}
	}
	return pods
}

func blocked(o Order) map[string]string {
	out := map[string]string{}
	for k, e := range o.Blocked {
		out[strings.TrimSuffix(strings.TrimPrefix(k, "default/"), "-"+orderNode)] = e.Reason
	}
	return out
}

func TestCheckOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		after   map[string]string
		blocked map[string]string // pod -> a part of its reason
	}{
		{"chain", map[string]string{"etcd": "", "api": "etcd", "ctrl": "api, etcd"}, nil},
		{"self", map[string]string{"a": "a"}, map[string]string{"a": "cycle (a, a)"}},
		{"pair", map[string]string{"a": "b", "b": "a", "c": "a"}, map[string]string{"a": "cycle (a, b, a)", "b": "cycle (a, b, a)"}},
		{"ring of three", map[string]string{"a": "c", "b": "a", "c": "b"}, map[string]string{"a": "cycle (a, c, b, a)", "b": "cycle", "c": "cycle"}},
		{"unknown", map[string]string{"a": "etcd", "b": "a"}, map[string]string{"a": "no manifest defines pod etcd in namespace default"}},
		{"other namespace", map[string]string{"a": "kube-system-etcd"}, map[string]string{"a": "no manifest defines pod kube-system-etcd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := blocked(CheckOrder(orderPods(t, tc.after), orderNode))
			if len(got) != len(tc.blocked) {
				t.Errorf("blocked %q, want %q", got, tc.blocked)
			}
			for pod, want := range tc.blocked {
				if !strings.Contains(got[pod], want) {
					t.Errorf("pod %s: %q, want %q", pod, got[pod], want)
				}
			}
		})
	}
	// The pod "c" above waits on a, which is in the cycle: not blocked
	// itself, it waits for a to be Ready, which the agent shows.
	o := CheckOrder(orderPods(t, map[string]string{"etcd": "", "api": "etcd"}), orderNode)
	if got := o.After["default/api-node1"]; len(got) != 1 || got[0] != "default/etcd-node1" {
		t.Errorf("After %q", o.After)
	}
	if got := o.Dependents["default/etcd-node1"]; len(got) != 1 || got[0] != "default/api-node1" {
		t.Errorf("Dependents %q", o.Dependents)
	}
}

// 10,000 pods in a chain, and in one ring, are checked without recursion
// and fast; the ring's message names a few of them only.
func TestCheckOrderLarge(t *testing.T) {
	const n = 10000
	chain, ring := map[string]string{}, map[string]string{}
	for i := range n {
		chain[fmt.Sprintf("p%d", i)] = ""
		if i > 0 {
			chain[fmt.Sprintf("p%d", i)] = fmt.Sprintf("p%d", i-1)
		}
		ring[fmt.Sprintf("p%d", i)] = fmt.Sprintf("p%d", (i+1)%n)
	}
	start := time.Now()
	if got := CheckOrder(orderPods(t, chain), orderNode); len(got.Blocked) != 0 {
		t.Errorf("a chain blocked %d pods", len(got.Blocked))
	}
	got := CheckOrder(orderPods(t, ring), orderNode)
	if len(got.Blocked) != n {
		t.Fatalf("a ring of %d blocked %d", n, len(got.Blocked))
	}
	if msg := got.Blocked["default/p0-node1"].Reason; len(msg) > 200 || !strings.Contains(msg, "and 9993 more") {
		t.Errorf("ring message (%d bytes): %.300s", len(msg), msg)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("checking took %v", d)
	}
}
