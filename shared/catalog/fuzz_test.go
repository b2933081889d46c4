package catalog

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzDecode: no catalog file panics the decoder or reaches the engine with a
// price or a size it cannot use; an accepted catalog writes and reads back the same,
// and no error names a Go type.
func FuzzDecode(f *testing.F) {
	f.Add(EmbeddedJSON()[:min(len(EmbeddedJSON()), 4096)])
	for _, s := range []string{
		`{"region":"us-east-1","instanceTypes":[` + validType + `]}`,
		`{"region":"us-east-1","instanceTypes":[{"name":"a.large","arch":"amd64","vcpu":2,"memoryMiB":4096,"maxPods":29,"offerings":[{"zone":"z","capacityType":"spot","available":true}]}]}`,
		`{"region":"r","instanceTypes":[{"name":"a","arch":"arm64","vcpu":9300000000000000,"memoryMiB":1e13,"maxPods":1,"gpu":{"count":1,"name":"g","manufacturer":"m"},"offerings":[{"zone":"z","capacityType":"on-demand","pricePerHour":1e308}]}]}`,
		`{"region":"r","instanceTypes":{}}`, `[]`, `null`, `{"region":"r","instanceTypes":[null]}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			if c != nil {
				t.Fatal("catalog and error")
			}
			for _, goName := range []string{"catalog.", "struct {", "Go struct", "Go value"} {
				if strings.Contains(err.Error(), goName) {
					t.Fatalf("error names a Go type: %v", err)
				}
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted catalog is invalid: %v", err)
		}
		for _, it := range c.InstanceTypes {
			for _, o := range it.Offerings {
				if msg := PriceProblem(o.PricePerHour); msg != "" {
					t.Fatalf("%s %s %s: accepted price %v: %s", it.Name, o.Zone, o.CapacityType, o.PricePerHour, msg)
				}
			}
			if _, ok := c.Lookup(it.Name); !ok {
				t.Fatalf("%s: not found by Lookup", it.Name)
			}
		}
		var out bytes.Buffer
		if err := c.WriteJSON(&out); err != nil {
			t.Fatalf("write: %v", err)
		}
		again, err := Decode(out.Bytes())
		if err != nil {
			t.Fatalf("own output does not read back: %v\n%s", err, out.String())
		}
		var out2 bytes.Buffer
		if err := again.WriteJSON(&out2); err != nil || !bytes.Equal(out.Bytes(), out2.Bytes()) {
			t.Fatalf("write/read is not a fixpoint (%v)", err)
		}
	})
}
