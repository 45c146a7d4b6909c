module @jit_reduce_axes attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x6x10xf32>) -> (tensor<6x10xf32> {jax.result_info = "result[0]"}, tensor<4x10xf32> {jax.result_info = "result[1]"}, tensor<4x6xf32> {jax.result_info = "result[2]"}, tensor<6xf32> {jax.result_info = "result[3]"}, tensor<f32> {jax.result_info = "result[4]"}, tensor<2x2xf32> {jax.result_info = "result[5]"}, tensor<4x10xi1> {jax.result_info = "result[6]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<4x6x10xf32>, tensor<f32>) -> tensor<6x10xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%arg0 init: %cst_0) applies stablehlo.add across dimensions = [1] : (tensor<4x6x10xf32>, tensor<f32>) -> tensor<4x10xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.reduce(%arg0 init: %cst_1) applies stablehlo.add across dimensions = [2] : (tensor<4x6x10xf32>, tensor<f32>) -> tensor<4x6xf32>
    %cst_2 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %3 = stablehlo.reduce(%arg0 init: %cst_2) applies stablehlo.maximum across dimensions = [0, 2] : (tensor<4x6x10xf32>, tensor<f32>) -> tensor<6xf32>
    %cst_3 = stablehlo.constant dense<0x7F800000> : tensor<f32>
    %4 = stablehlo.reduce(%arg0 init: %cst_3) applies stablehlo.minimum across dimensions = [0, 1, 2] : (tensor<4x6x10xf32>, tensor<f32>) -> tensor<f32>
    %5 = stablehlo.slice %arg0 [0:2, 0:2, 0:10] : (tensor<4x6x10xf32>) -> tensor<2x2x10xf32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %6 = stablehlo.reduce(%5 init: %cst_4) applies stablehlo.multiply across dimensions = [2] : (tensor<2x2x10xf32>, tensor<f32>) -> tensor<2x2xf32>
    %cst_5 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<4x6x10xf32>
    %8 = stablehlo.compare GT, %arg0, %7, FLOAT : (tensor<4x6x10xf32>, tensor<4x6x10xf32>) -> tensor<4x6x10xi1>
    %c = stablehlo.constant dense<false> : tensor<i1>
    %9 = stablehlo.reduce(%8 init: %c) applies stablehlo.or across dimensions = [1] : (tensor<4x6x10xi1>, tensor<i1>) -> tensor<4x10xi1>
    return %0, %1, %2, %3, %4, %6, %9 : tensor<6x10xf32>, tensor<4x10xf32>, tensor<4x6xf32>, tensor<6xf32>, tensor<f32>, tensor<2x2xf32>, tensor<4x10xi1>
  }
}
