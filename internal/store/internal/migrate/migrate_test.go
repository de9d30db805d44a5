package migrate

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestLoad(t *testing.T) {
	ms, err := Load(fstest.MapFS{
		"m/0002_more.sql":  {Data: []byte("B")},
		"m/0001_first.sql": {Data: []byte("A")},
		"m/README":         {Data: []byte("ignored")},
	}, "m")
	require.NoError(t, err)
	require.Equal(t, []Migration{{1, "0001_first", "A"}, {2, "0002_more", "B"}}, ms)

	for name, fsys := range map[string]fstest.MapFS{
		"no number": {"m/first.sql": {}},
		"zero":      {"m/0000_x.sql": {}},
		"duplicate": {"m/0001_a.sql": {}, "m/1_b.sql": {}},
	} {
		_, err := Load(fsys, "m")
		require.Error(t, err, name)
	}
}
