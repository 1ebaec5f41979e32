# Installs the build into a scratch prefix, then configures, builds and runs tests/install_consumer
# against it: `cmake --install` + find_package(mconv) + mconv::mconv work for a user.
set(prefix ${BUILD}/install-check/prefix)
file(REMOVE_RECURSE ${BUILD}/install-check)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix} RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC}/tests/install_consumer -B ${BUILD}/install-check/consumer
                        -DCMAKE_PREFIX_PATH=${prefix} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "find_package(mconv) failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD}/install-check/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building against the installed mconv failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${prefix}/lib ${BUILD}/install-check/consumer/c
                OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(rc OR NOT out MATCHES "rows 12 table 1024 bytes")
  message(FATAL_ERROR "the consumer printed '${out}' (exit ${rc})")
endif()
