module @jit_while_loop attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>) -> (tensor<i32> {jax.result_info = "result[0]"}, tensor<f32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.abs %arg0 : tensor<4x8xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %2:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %1) : tensor<i32>, tensor<f32>
    cond {
      %cst_1 = stablehlo.constant dense<1.000000e+02> : tensor<f32>
      %3 = stablehlo.compare LT, %iterArg_0, %cst_1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    } do {
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %3 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      %cst_2 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %4 = stablehlo.multiply %iterArg_0, %cst_2 : tensor<f32>
      %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %5 = stablehlo.add %4, %cst_3 : tensor<f32>
      stablehlo.return %3, %5 : tensor<i32>, tensor<f32>
    }
    return %2#0, %2#1 : tensor<i32>, tensor<f32>
  }
}
