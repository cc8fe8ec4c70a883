package spec

import "github.com/staticpodd/staticpodd/agent/podspec"

// Lengths past which the kernel refuses a value anyway, checked before the
// value reaches libcontainer, whose errors quote it whole (an image decides
// these strings): a path (the executable, the working directory) of
// PATH_MAX bytes or more, an argument or environment entry over
// MAX_ARG_STRLEN, a user or group name over LOGIN_NAME_MAX.
const (
	maxPath = 4096      // PATH_MAX, with its terminating NUL
	maxArg  = 32 * 4096 // MAX_ARG_STRLEN
	maxName = 256       // LOGIN_NAME_MAX
)

// shorten and show are how an error shows a value: podspec.Shorten and
// podspec.Quote, as manifest errors show a field's.
func shorten(s string) string { return podspec.Shorten(s) }

func show(s string) string { return podspec.Quote(s) }
