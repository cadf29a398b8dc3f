# cmake -P script behind the install tests (see CMakeLists.txt here). MODE is one of
#   install       cmake --install BUILD_DIR --prefix PREFIX (into an empty prefix)
#   find_package  configure and build EXAMPLES with CMAKE_PREFIX_PATH=PREFIX, run `direct` and
#                 `poisson`
#   pkg_config    compile EXAMPLES/direct.c with `pkg-config --cflags --libs fmmkit`, run it
cmake_minimum_required(VERSION 3.22)

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(libpath ${PREFIX}/${LIBDIR})
separate_arguments(flag_list UNIX_COMMAND "${FLAGS}")

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX})
  run_step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
  foreach(f include/fmmkit.h include/fmmkit_poisson.h ${LIBDIR}/pkgconfig/fmmkit.pc ${LIBDIR}/cmake/fmmkit/fmmkitConfig.cmake)
    if(NOT EXISTS ${PREFIX}/${f})
      message(FATAL_ERROR "cmake --install did not install ${f}")
    endif()
  endforeach()

elseif(MODE STREQUAL "find_package")
  set(dir ${WORK}/find_package)
  file(REMOVE_RECURSE ${dir})
  run_step("configure examples/c with find_package(fmmkit)"
           ${CMAKE_COMMAND} -S ${EXAMPLES} -B ${dir} -DCMAKE_PREFIX_PATH=${PREFIX}
           -DCMAKE_C_COMPILER=${C_COMPILER} "-DCMAKE_C_FLAGS=${FLAGS}" -DCMAKE_BUILD_TYPE=Release)
  run_step("build examples/c" ${CMAKE_COMMAND} --build ${dir})
  run_step("run direct (find_package build)" ${dir}/direct)
  message("${step_output}")
  run_step("run poisson (find_package build)" ${dir}/poisson)
  message("${step_output}")

elseif(MODE STREQUAL "pkg_config")
  find_program(PKG_CONFIG NAMES pkg-config pkgconf)
  if(NOT PKG_CONFIG)
    message("SKIPPED: pkg-config is not installed, so the pkg-config half of the install test "
            "cannot run (the find_package half still does)")
    return()
  endif()
  set(ENV{PKG_CONFIG_PATH} ${libpath}/pkgconfig)
  # The .pc file must describe where it was installed, not the configure-time prefix.
  execute_process(COMMAND ${PKG_CONFIG} --variable=includedir fmmkit
                  OUTPUT_VARIABLE includedir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config cannot find fmmkit in ${libpath}/pkgconfig")
  endif()
  get_filename_component(includedir "${includedir}" REALPATH)
  get_filename_component(want "${PREFIX}/include" REALPATH)
  if(NOT includedir STREQUAL want)
    message(FATAL_ERROR "the installed fmmkit.pc gives includedir=${includedir}, but fmmkit was "
            "installed with --prefix ${PREFIX}: the .pc file keeps the configure-time "
            "CMAKE_INSTALL_PREFIX and is wrong after `cmake --install --prefix` "
            "(make install PREFIX=...)")
  endif()
  run_step("pkg-config --cflags --libs fmmkit" ${PKG_CONFIG} --cflags --libs fmmkit)
  string(STRIP "${step_output}" pc_flags)
  separate_arguments(pc_list UNIX_COMMAND "${pc_flags}")
  set(dir ${WORK}/pkg_config)
  file(MAKE_DIRECTORY ${dir})
  run_step("cc direct.c \$(pkg-config --cflags --libs fmmkit)"
           ${C_COMPILER} ${flag_list} -std=c11 ${EXAMPLES}/direct.c ${pc_list} -o ${dir}/direct)
  run_step("run direct (pkg-config build)"
           ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libpath} ${dir}/direct)
  message("${step_output}")

else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
