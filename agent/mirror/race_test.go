//go:build race

package mirror

// raceEnabled: the race detector's runtime keeps more of what a test
// allocates alive for longer, so heap bounds measured in a test do not hold
// under it.
const raceEnabled = true
