//go:build !amd64 || purego

package cpu

func dotHalfWide(k []byte, q []float32) float32 { return dotHalfWideGo(k, q) }

func accumulateHalf(acc []float32, v []byte, vs float32) { accumulateHalfGo(acc, v, vs) }

func scaleHalf(acc []float32, ms float32) { scaleHalfGo(acc, ms) }

func scoresHalf(x []float32, k []byte, stride, kHead int, q []float32, scale float32, n int, _ []byte) {
	scoresHalfGo(x, k, stride, kHead, q, scale, n)
}

func onlineWeights(x []float32, n int, ms, vs, _ []float32) {
	onlineWeightsGo(x[:n], ms[:n], vs[:n])
}

func accumulateHalfUnits(acc []float32, v []byte, stride int, ms, vs []float32, wstride, units, n int, sums []float32) {
	accumulateHalfUnitsGo(acc, v, stride, ms, vs, wstride, units, n, sums)
}
