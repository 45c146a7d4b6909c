module @jit_matmul_bf16 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<64x96xbf16>, %arg1: tensor<96x48xbf16>) -> (tensor<64x48xbf16> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<64x96xbf16>, tensor<96x48xbf16>) -> tensor<64x48xbf16>
    return %0 : tensor<64x48xbf16>
  }
}
