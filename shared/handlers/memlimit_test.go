package handlers

import "testing"

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want int64
	}{
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024"}, 870 << 20}, // 1024 × 0.85 = 870.4 MiB, rounded down
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, 456340275},
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024", "GOMEMLIMIT": "700MiB"}, 0},
		{map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots"}, 0},
		{map[string]string{}, 0},
	} {
		got := MemoryLimit(func(k string) string { return tc.env[k] })
		if tc.want == 870<<20 {
			if got < 870<<20 || got > 871<<20 {
				t.Errorf("%v: %d, want 870.4 MiB", tc.env, got)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("%v: %d, want %d", tc.env, got, tc.want)
		}
	}
}
