// Package chaos is the soak of the built daemon: pods of every shape while
// manifests churn, the daemon, its monitors, its disk and its URL source are
// killed, stopped, filled and cut off at random moments, pods rolled back,
// started after others and restarted, and invariants that
// say nothing was lost are checked all along. make test-chaos runs a short
// soak; CHAOS_SEED replays one, CHAOS_CYCLES and CHAOS_PODS make it longer.
package chaos

import (
	"os"
	"testing"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }
