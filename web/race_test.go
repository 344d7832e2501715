//go:build race

package web_test

// raceDetector reports whether the tests run under the race detector,
// which slows the in-process gateway several times.
const raceDetector = true
