package leaktest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// parked blocks until stop is closed; its frame names this package.
func parked(started chan<- struct{}, stop <-chan struct{}) {
	close(started)
	<-stop
}

func TestLeakedSeesARunningGoroutineAndItsEnd(t *testing.T) {
	scope := "agentwire/internal/leaktest.parked"
	stop := make(chan struct{})
	started, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		parked(started, stop)
	}()
	<-started
	stacks := Leaked(scope, 50*time.Millisecond)
	assert.Contains(t, stacks, "leaktest.parked")

	close(stop)
	<-done
	assert.Empty(t, Leaked(scope, time.Second))
}

func TestLeakedIgnoresTheCaller(t *testing.T) {
	assert.Empty(t, Leaked("agentwire/internal/leaktest.TestLeakedIgnoresTheCaller", 0))
}
