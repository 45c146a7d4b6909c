module @jit_cond attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<1xi32>, %arg1: tensor<8x20xf32>) -> (tensor<8x20xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.reshape %arg0 : (tensor<1xi32>) -> tensor<i32>
    %c = stablehlo.constant dense<3> : tensor<i32>
    %1 = stablehlo.compare GT, %0, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %2 = stablehlo.convert %1 : (tensor<i1>) -> tensor<i32>
    %3 = "stablehlo.case"(%2) ({
      %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %4 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x20xf32>
      %5 = stablehlo.subtract %arg1, %4 : tensor<8x20xf32>
      stablehlo.return %5 : tensor<8x20xf32>
    }, {
      %4 = stablehlo.sine %arg1 : tensor<8x20xf32>
      %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %5 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x20xf32>
      %6 = stablehlo.multiply %4, %5 : tensor<8x20xf32>
      stablehlo.return %6 : tensor<8x20xf32>
    }) : (tensor<i32>) -> tensor<8x20xf32>
    return %3 : tensor<8x20xf32>
  }
}
