package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/manifest"
)

func TestPrintOnce(t *testing.T) {
	web := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
			{Name: "a", Ready: true, RestartCount: 1, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}}
	etcd := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-node1", Namespace: "kube-system"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "etcd"}}},
		Status: v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{
			{Name: "etcd", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "not present"}}}}}}
	bad := &manifest.Problem{Origin: "/m/bad.yaml", Err: errors.New("no containers")}
	var b bytes.Buffer
	err := printOnce(&b, []agent.OnceResult{
		{Pod: web, Outcome: agent.OnceRunning},
		{Pod: etcd, Outcome: agent.OnceFailed, Message: "etcd: ErrImageNeverPull: not present"},
		{Problem: bad, Outcome: agent.OnceInvalid, Message: "no containers"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range [][]string{
		{"NAMESPACE", "NAME", "RESULT", "STATUS", "RESTARTS"},
		{"default", "web-node1", "Running", "Running", "1"},
		{"kube-system", "etcd-node1", "Failed", "ErrImageNeverPull", "0"},
		{"-", "/m/bad.yaml", "Invalid", "-", "-"},
	} {
		if !hasRow(b.String(), row...) {
			t.Errorf("output lacks row %q:\n%s", row, b.String())
		}
	}
	want := "\nNot running:\n  kube-system/etcd-node1 etcd: ErrImageNeverPull: not present\n  /m/bad.yaml: no containers\n"
	if !strings.HasSuffix(b.String(), want) {
		t.Errorf("output does not end with %q:\n%s", want, b.String())
	}
}
