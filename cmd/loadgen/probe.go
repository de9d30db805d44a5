package main

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// probeSamples is what the machine probe saw while one side ran.
type probeSamples struct {
	fsync []time.Duration // one 4 KiB O_SYNC write each
	late  []time.Duration // how late each timer fired
}

// probeInterval is how often the probe samples.
const probeInterval = 100 * time.Millisecond

// probeMachine samples, until ctx is done, how long a 4 KiB O_SYNC write
// takes in dir (on the disk of agentwire's data dir) and how late a timer
// fires in the loadgen process: the machine is shared, and a slow disk or
// a starved CPU shows in every latency; these say when it did.
func probeMachine(ctx context.Context, dir string) probeSamples {
	var s probeSamples
	f, err := os.OpenFile(filepath.Join(dir, "probe"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_SYNC, 0o644)
	if err != nil {
		return s
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	t := time.NewTimer(probeInterval)
	defer t.Stop()
	for {
		due := time.Now().Add(probeInterval)
		t.Reset(probeInterval)
		select {
		case <-ctx.Done():
			return s
		case <-t.C:
		}
		s.late = append(s.late, max(0, time.Since(due)))
		began := time.Now()
		if _, err := f.WriteAt(block, 0); err == nil {
			s.fsync = append(s.fsync, time.Since(began))
		}
	}
}
