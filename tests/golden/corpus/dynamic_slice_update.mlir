module @jit_dynamic_slice_update attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<12x16xf32>, %arg1: tensor<2xi32>, %arg2: tensor<3x5xf32>) -> (tensor<4x8xf32> {jax.result_info = "result[0]"}, tensor<12x16xf32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.slice %arg1 [0:1] : (tensor<2xi32>) -> tensor<1xi32>
    %1 = stablehlo.reshape %0 : (tensor<1xi32>) -> tensor<i32>
    %2 = stablehlo.slice %arg1 [1:2] : (tensor<2xi32>) -> tensor<1xi32>
    %3 = stablehlo.reshape %2 : (tensor<1xi32>) -> tensor<i32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %4 = stablehlo.compare LT, %1, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_0 = stablehlo.constant dense<12> : tensor<i32>
    %5 = stablehlo.add %1, %c_0 : tensor<i32>
    %6 = stablehlo.select %4, %5, %1 : tensor<i1>, tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %7 = stablehlo.compare LT, %3, %c_1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_2 = stablehlo.constant dense<16> : tensor<i32>
    %8 = stablehlo.add %3, %c_2 : tensor<i32>
    %9 = stablehlo.select %7, %8, %3 : tensor<i1>, tensor<i32>
    %10 = stablehlo.dynamic_slice %arg0, %6, %9, sizes = [4, 8] : (tensor<12x16xf32>, tensor<i32>, tensor<i32>) -> tensor<4x8xf32>
    %11 = stablehlo.slice %arg1 [1:2] : (tensor<2xi32>) -> tensor<1xi32>
    %12 = stablehlo.reshape %11 : (tensor<1xi32>) -> tensor<i32>
    %13 = stablehlo.slice %arg1 [0:1] : (tensor<2xi32>) -> tensor<1xi32>
    %14 = stablehlo.reshape %13 : (tensor<1xi32>) -> tensor<i32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %15 = stablehlo.compare LT, %12, %c_3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_4 = stablehlo.constant dense<12> : tensor<i32>
    %16 = stablehlo.add %12, %c_4 : tensor<i32>
    %17 = stablehlo.select %15, %16, %12 : tensor<i1>, tensor<i32>
    %c_5 = stablehlo.constant dense<0> : tensor<i32>
    %18 = stablehlo.compare LT, %14, %c_5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c_6 = stablehlo.constant dense<16> : tensor<i32>
    %19 = stablehlo.add %14, %c_6 : tensor<i32>
    %20 = stablehlo.select %18, %19, %14 : tensor<i1>, tensor<i32>
    %21 = stablehlo.dynamic_update_slice %arg0, %arg2, %17, %20 : (tensor<12x16xf32>, tensor<3x5xf32>, tensor<i32>, tensor<i32>) -> tensor<12x16xf32>
    return %10, %21 : tensor<4x8xf32>, tensor<12x16xf32>
  }
}
