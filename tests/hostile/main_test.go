package hostile

import (
	"os"
	"testing"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }
