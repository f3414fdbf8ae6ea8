package config

import (
	"testing"

	"github.com/cphicache/cphicache/hicache/prefill"
	"github.com/cphicache/cphicache/hicache/sizing"
)

// TestSizesCountThePrefillModelsBytes: with the serving clock's --prefill-model over a scaled-down
// geometry (--layers 1 --token-bytes 8), --l2-bytes, --device-bytes and --l3-bytes count the
// model's KV, not the geometry's: 1 TiB of DeepSeek-V3 (70,272 bytes a token) is 15.6M tokens a
// node, 20 GiB a GPU at cp 8 is 2.44M tokens over the group, and the L3's store keeps the blocks of
// --l3-bytes of the model in the copies' bytes. The capacity says each per CP group and per node.
func TestSizesCountThePrefillModelsBytes(t *testing.T) {
	m, err := sizing.LookupModel("deepseek-v3")
	if err != nil {
		t.Fatal(err)
	}
	o := &Options{
		Layers: 1, PayloadsPerLayer: 1, PageTokens: 64, TokenBytes: 8,
		L2Bytes: 1 << 40, DeviceBytes: 20 << 30,
		L3: L3Options{Dir: "/nonexistent", Bytes: 4 << 40},
		Serving: &ServingOptions{Prefill: prefill.Options{Model: "deepseek-v3", GPU: "h200",
			Efficiency: prefill.DefaultEfficiency}},
	}
	sized, err := o.Size(8, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	page := 64 * m.TokenBytes()
	wantSlots, wantPages := int((1<<40)/page), int((20<<30)*8/page)
	if sized.ModelTokenBytes != m.TokenBytes() || sized.L2Slots != wantSlots ||
		sized.DevicePages != wantPages {
		t.Fatalf("sized: %d bytes a token, %d slots, %d pages; want %d, %d, %d",
			sized.ModelTokenBytes, sized.L2Slots, sized.DevicePages, m.TokenBytes(), wantSlots,
			wantPages)
	}
	// the store holds 8 x 8 bytes a token (8 ranks, 1 layer, 1 payload) for the model's 70,272
	if want := int64(4<<40) * 64 / m.TokenBytes(); sized.L3.StoreBytes != want {
		t.Errorf("the L3 store's budget %d bytes, want %d", sized.L3.StoreBytes, want)
	}
	c := sized.Capacity(8, 16) // two CP groups a node of 16 GPUs
	if c.Model != "deepseek-v3" || !c.Scaled || c.TokenBytes != m.TokenBytes() ||
		c.L2BytesPerNode != 2*c.L2Bytes || c.DeviceBytesPerGroup != 8*c.DeviceBytes ||
		c.DeviceBytesPerNode != 16*c.DeviceBytes || c.L3Bytes != 4<<40 ||
		c.L3Tokens != (4<<40)/m.TokenBytes() || c.L3BytesPerNode != 8<<40 {
		t.Errorf("capacity %+v", c)
	}
	// Without a model, the bytes are the geometry's, as always: the L3's budget as given.
	o.Serving = nil
	plain, err := o.Size(8, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	if plain.ModelTokenBytes != 64 || plain.L3.StoreBytes != 4<<40 || plain.Capacity(8, 8).Model != "" {
		t.Errorf("without a model: %d bytes a token, store %d", plain.ModelTokenBytes,
			plain.L3.StoreBytes)
	}
}
