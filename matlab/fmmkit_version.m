function v = fmmkit_version()
  % fmmkit_version  The version of the fmmkit library behind the MEX gateway, 'major.minor.patch'.
  v = fmmkit_mex('version');
end
