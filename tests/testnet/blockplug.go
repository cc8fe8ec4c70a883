package testnet

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// BlockPluginName is the name under which a test binary plays BlockPlugin:
// a test links its own executable into a plugin directory under this name.
const BlockPluginName = "blockplug"

// IsBlockPlugin reports whether this process was started as BlockPlugin.
func IsBlockPlugin() bool { return filepath.Base(os.Args[0]) == BlockPluginName }

// BlockPlugin is a chained CNI plugin a test holds up: on each command it
// creates <markDir>/<COMMAND>-started, then, while <markDir>/block-<COMMAND>
// exists, waits; then it passes the previous result on (ADD) or does
// nothing (CHECK, DEL). markDir is the "markDir" of its configuration. It
// lets a test kill the daemon in the middle of an ADD or a DEL.
func BlockPlugin() int {
	cmd := os.Getenv("CNI_COMMAND")
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		return fail(err)
	}
	var conf struct {
		CNIVersion string          `json:"cniVersion"`
		MarkDir    string          `json:"markDir"`
		PrevResult json.RawMessage `json:"prevResult"`
	}
	if err := json.Unmarshal(in, &conf); err != nil {
		return fail(err)
	}
	if cmd == "VERSION" {
		fmt.Printf(`{"cniVersion":%q,"supportedVersions":["0.4.0","1.0.0"]}`, conf.CNIVersion)
		return 0
	}
	if err := os.WriteFile(filepath.Join(conf.MarkDir, cmd+"-started"), nil, 0o644); err != nil {
		return fail(err)
	}
	block := filepath.Join(conf.MarkDir, "block-"+cmd)
	for {
		if _, err := os.Stat(block); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // a fixture's wait for the test's word
	}
	if cmd == "ADD" {
		if len(conf.PrevResult) == 0 {
			return fail(fmt.Errorf("ADD without prevResult: chain %s after a plugin that returns one", BlockPluginName))
		}
		os.Stdout.Write(conf.PrevResult)
	}
	return 0
}

func fail(err error) int {
	fmt.Printf(`{"cniVersion":"1.0.0","code":100,"msg":%q}`, err.Error())
	return 1
}
