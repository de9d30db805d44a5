package local_test

import (
	"testing"

	"github.com/agentwire/agentwire/internal/bus"
	"github.com/agentwire/agentwire/internal/bus/bustest"
	"github.com/agentwire/agentwire/internal/bus/local"
)

func TestBus(t *testing.T) {
	bustest.Run(t, func(*testing.T) bus.Bus { return local.New() })
}
