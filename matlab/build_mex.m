function build_mex(varargin)
  % build_mex  Builds fmmkit_mex, the gateway of the fmmkit functions, in this folder: with
  % MATLAB's mex in MATLAB, with mkoctfile in Octave (where `cmake --build build --target
  % fmmkit_octave` does the same from CMake).
  %
  %   build_mex()                          % fmmkit built in ../build (make) or ../build-cpu,
  %                                        % or installed (this folder in <prefix>/share/fmmkit)
  %   build_mex('prefix', '/usr/local')    % an installed fmmkit: <prefix>/include, <prefix>/lib
  %   build_mex('include', I, 'lib', L)    % the folder of fmmkit.h, the folder of libfmmkit
  %   build_mex(..., 'static', true)       % link libfmmkit.a (GCC's OpenMP) rather than .so
  %
  % With libfmmkit.so (the default where it exists) the MEX file finds the library through an
  % rpath to its folder, so keep the library there. With libfmmkit.a the MEX file stands
  % alone. Then addpath(this folder) and try fmmkit_version(). See docs/octave.md.
  here = fileparts(mfilename('fullpath'));
  opts = struct('prefix', '', 'include', '', 'lib', '', 'static', false);
  for i = 1:2:numel(varargin)
    key = lower(varargin{i});
    if ~isfield(opts, key) || i == numel(varargin)
      error('fmmkit:arg', 'build_mex: options are prefix, include, lib, static (name-value)');
    end
    opts.(key) = varargin{i + 1};
  end
  if isempty(opts.include) || isempty(opts.lib)
    [opts.include, opts.lib] = find_library(here, opts.prefix);
  end
  shared = fullfile(opts.lib, 'libfmmkit.so');
  static = fullfile(opts.lib, 'libfmmkit.a');
  use_static = opts.static || ~exist(shared, 'file');
  if use_static && ~exist(static, 'file')
    error('fmmkit:arg', 'build_mex: neither libfmmkit.so nor libfmmkit.a in %s', opts.lib);
  end
  src = fullfile(here, 'fmmkit_mex.c');
  out = fullfile(here, 'fmmkit_mex');
  octave = exist('OCTAVE_VERSION', 'builtin') ~= 0;
  if use_static
    libs = {static, '-lgomp', '-lm'};
  else
    libs = {['-L' opts.lib], '-lfmmkit', ['-Wl,-rpath,' opts.lib]};
  end
  if octave
    args = [{'--mex', '-DFMK_MEX_OCTAVE', ['-I' opts.include], src}, libs, ...
            {'-o', [out '.mex']}];
    printf('mkoctfile %s\n', strjoin(args, ' '));
    [output, status] = mkoctfile(args{:});
    if status ~= 0
      error('fmmkit:build', 'mkoctfile failed:\n%s', output);
    end
  else
    % -R2017b: the separate complex API, the one tested (under Octave); utIsInterruptPending
    % (libut) lets Ctrl-C stop a long evaluation; C11 for the gateway's declarations.
    if ~use_static
      link = {['LDFLAGS=$LDFLAGS -Wl,-rpath,' opts.lib]};
      libs = libs(1:2);
    else
      link = {'LDFLAGS=$LDFLAGS -fopenmp'};
    end
    args = [{'-R2017b', '-DFMK_MEX_MATLAB_UT', 'CFLAGS=$CFLAGS -std=c11', ...
             ['-I' opts.include], src}, libs, {'-lut'}, link, {'-output', out}];
    fprintf('mex %s\n', strjoin(args, ' '));
    mex(args{:});
  end
  fprintf('built %s; addpath(''%s'') and try fmmkit_version()\n', out, here);
end

% The folders of fmmkit.h and libfmmkit: an installed prefix, or a build tree beside this folder.
function [inc, lib] = find_library(here, prefix)
  root = fileparts(here);
  if ~isempty(prefix)
    candidates = {{fullfile(prefix, 'include'), fullfile(prefix, 'lib')}, ...
                  {fullfile(prefix, 'include'), fullfile(prefix, 'lib64')}, ...
                  {fullfile(prefix, 'include'), fullfile(prefix, 'lib', 'x86_64-linux-gnu')}};
  else
    installed = fileparts(fileparts(root));  % this folder as <prefix>/share/fmmkit/matlab
    candidates = {{fullfile(root, 'include'), fullfile(root, 'build')}, ...
                  {fullfile(root, 'include'), fullfile(root, 'build-cpu')}, ...
                  {fullfile(installed, 'include'), fullfile(installed, 'lib')}, ...
                  {fullfile(installed, 'include'), fullfile(installed, 'lib', 'x86_64-linux-gnu')}, ...
                  {'/usr/local/include', '/usr/local/lib'}};
  end
  for i = 1:numel(candidates)
    c = candidates{i};
    if exist(fullfile(c{1}, 'fmmkit.h'), 'file') && ...
       (exist(fullfile(c{2}, 'libfmmkit.so'), 'file') || exist(fullfile(c{2}, 'libfmmkit.a'), 'file'))
      inc = c{1};
      lib = c{2};
      return;
    end
  end
  error('fmmkit:arg', ['build_mex: fmmkit not found; build it (make, in %s) or name it: ' ...
                       'build_mex(''prefix'', P) or build_mex(''include'', I, ''lib'', L)'], root);
end
