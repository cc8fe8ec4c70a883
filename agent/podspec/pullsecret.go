package podspec

import "log/slog"

// PullSecret is the Docker config of one of a pod's imagePullSecrets (a
// kubernetes.io/dockerconfigjson or legacy kubernetes.io/dockercfg Secret),
// which that pod's pulls use before the node's own credentials, as the
// kubelet's credentialprovider/secrets.MakeDockerKeyring does.
//
// Config is secret: it is never logged nor shown. Formatting a PullSecret
// (%v, %+v, %#v, slog) prints its Name only.
type PullSecret struct {
	// Name is the Secret's namespace/name, for messages.
	Name string
	// Config is the Secret's .dockerconfigjson ({"auths": {...}}), or its
	// .dockercfg (the auths map itself) when Legacy is set.
	Config []byte
	Legacy bool
}

func (s PullSecret) String() string   { return "pull secret " + s.Name }
func (s PullSecret) GoString() string { return s.String() }

// LogValue keeps Config out of structured logs.
func (s PullSecret) LogValue() slog.Value { return slog.StringValue(s.String()) }
