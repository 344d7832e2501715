//go:build race

package scenario

// raceEnabled reports whether this executable has the race detector, which
// the floor it starts (floor.go) then has too.
const raceEnabled = true
