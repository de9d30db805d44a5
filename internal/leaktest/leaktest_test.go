package leaktest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// fakeTB records what check does with a test: the cleanups it registers
// and the errors it reports. Other testing.TB methods are not used.
type fakeTB struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

// end runs the cleanups as a test's end does, last registered first.
func (f *fakeTB) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func TestCheckReportsAGoroutineStartedAfterIt(t *testing.T) {
	scope := "agentwire/internal/leaktest.parked"
	fake := &fakeTB{}
	check(fake, scope, 50*time.Millisecond)

	stop := make(chan struct{})
	started, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		parked(started, stop)
	}()
	<-started
	fake.end()
	close(stop)
	<-done

	require.Len(t, fake.errors, 1)
	assert.Contains(t, fake.errors[0], "goroutines left running")
	assert.Contains(t, fake.errors[0], "leaktest.parked")
}

func TestCheckIgnoresGoroutinesRunningBeforeIt(t *testing.T) {
	scope := "agentwire/internal/leaktest.parked"
	stop := make(chan struct{})
	started, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		parked(started, stop)
	}()
	<-started
	defer func() { close(stop); <-done }()

	fake := &fakeTB{}
	check(fake, scope, 50*time.Millisecond)
	fake.end()
	assert.Empty(t, fake.errors)
}

func TestCheckWaitsForGoroutinesThatAreEnding(t *testing.T) {
	scope := "agentwire/internal/leaktest.parked"
	fake := &fakeTB{}
	check(fake, scope, 5*time.Second)

	stop := make(chan struct{})
	started := make(chan struct{})
	go parked(started, stop)
	<-started
	// A cleanup registered after check runs before it: it stops the
	// goroutine, which check then gives time to end.
	fake.Cleanup(func() { time.AfterFunc(20*time.Millisecond, func() { close(stop) }) })
	fake.end()
	assert.Empty(t, fake.errors)
}

func TestCheckPassesATestThatLeavesNothing(t *testing.T) {
	Check(t, "agentwire/internal/leaktest.parked")
	stop := make(chan struct{})
	started := make(chan struct{})
	go parked(started, stop)
	<-started
	t.Cleanup(func() { close(stop) })
}

func TestGoroutineID(t *testing.T) {
	assert.Equal(t, uint64(42), goroutineID("goroutine 42 [chan receive, 1 minutes]:\nmain.main()"))
	assert.Equal(t, uint64(0), goroutineID("goroutine x [running]:"))
	assert.Equal(t, uint64(0), goroutineID("not a stack"))
	for _, g := range goroutines() {
		assert.NotZero(t, g.id, "%s", g.stack)
	}
}
